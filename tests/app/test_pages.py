"""Every page through Streamlit's AppTest on the default model: no exception, and widgets change what
is shown. Charts are read back from their plotly spec. What does not depend on the model (the sink
toggle, a new prompt, a prompt from the URL; the MoE page, which shows the zoo's trained variants whatever
model is loaded) opens the app on the zoo's tiny dense base model instead."""

from __future__ import annotations


import numpy as np
import pytest

from tests.helpers.apptest import MAIN, app_on, chart, decode, no_errors, page_path, pick_head
from tests.helpers.head_maps import heatmap


@pytest.fixture
def app(default_model_home, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    return AppTest.from_file(MAIN, default_timeout=300)


@pytest.fixture
def dense_zoo_app():
    """The app on the zoo's dense base model (like SmolLM2, no experts), on a prompt its vocabulary knows."""
    from txviz.loading.zoo import SHIPPED_ZOO

    return app_on(str(SHIPPED_ZOO / "base"), "Mary had a red kite.", timeout=300)


def test_attention_page_shows_the_prompt_and_follows_the_head(app):
    at = app.run()
    no_errors(at)
    heat = heatmap(at)["data"][0]
    assert any("trophy" in label for label in heat["x"])
    assert "Layer 0, head 0" in heatmap(at)["layout"]["title"]["text"]
    first = decode(heat["z"])

    pick_head(at, head=5).run()
    no_errors(at)
    moved = heatmap(at)
    assert "head 5" in moved["layout"]["title"]["text"]
    assert not np.array_equal(decode(moved["data"][0]["z"]), first, equal_nan=True)
    assert at.query_params["head"] == ["5"] or at.query_params["head"] == "5"


def test_step_by_step_runs_only_when_opened_and_matches_the_model(app):
    at = app.run()
    ids = [el.proto.id for el in at.get("plotly_chart")]
    assert not any("step_raw" in i for i in ids)  # collapsed: not computed, not sent
    at.session_state["steps_open"] = True  # what a click on the expander does
    at.session_state["plain_map_open"] = True  # the map as a plain chart: the model's own weights in float32
    at.run()
    no_errors(at)
    probs = decode(chart(at, "step_probs")["data"][0]["z"]).astype(float)
    heat = decode(chart(at, "heatmap_plain")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(probs, np.nan_to_num(heat), atol=1e-6)  # recomputed = the model's own
    assert any("differ from the model's own by at most" in m.value for m in at.markdown)


def test_sink_toggle_renormalizes_without_the_first_token(dense_zoo_app):
    at = dense_zoo_app.run()
    assert np.nansum(decode(heatmap(at)["data"][0]["z"]).astype(float)[1:, 0]) > 0  # shown first
    at.toggle(key="hide_sink").set_value(True).run()
    no_errors(at)
    z = decode(heatmap(at)["data"][0]["z"]).astype(float)
    assert np.nansum(z[1:, 0]) == 0
    np.testing.assert_allclose(np.nansum(z[1:], axis=1), 1.0, atol=1e-3)


def test_new_prompt_retokenizes_and_empty_prompt_warns(dense_zoo_app):
    at = dense_zoo_app.run()
    assert not any("bottle" in label for label in heatmap(at)["data"][0]["x"])
    at.sidebar.text_area(key="prompt").input("Helen Kelly had a blue bottle.").run()  # words the zoo knows
    no_errors(at)
    assert any("bottle" in label for label in heatmap(at)["data"][0]["x"])
    at.sidebar.text_area(key="prompt").input("   ").run()
    no_errors(at)
    assert any("empty" in w.value for w in at.warning)


def test_prompt_from_the_url():
    from txviz.loading.zoo import SHIPPED_ZOO

    at = app_on(str(SHIPPED_ZOO / "base"), "Shared by link.", timeout=300)
    at.query_params["layer"] = "3"  # the last of the zoo model's 4 layers
    at.run()
    no_errors(at)
    assert at.sidebar.text_area(key="prompt").value == "Shared by link."
    assert "Layer 3" in heatmap(at)["layout"]["title"]["text"]


def test_heads_page_detectors_and_custom_pattern(app):
    at = app.run()
    at.switch_page(page_path("heads")).run()
    no_errors(at)
    induction = decode(chart(at, "det_ind")["data"][0]["z"]).astype(float)
    assert induction.shape == (30, 9) and induction.max() > 0.3  # SmolLM2 has strong induction heads
    before = decode(chart(at, "det_custom")["data"][0]["z"]).astype(float)
    at.number_input(key="pattern_offset").set_value(1).run()
    no_errors(at)
    after = decode(chart(at, "det_custom")["data"][0]["z"]).astype(float)
    assert not np.allclose(before, after)


def test_block_page_layers_and_logit_lens(app):
    at = app.run()
    at.switch_page(page_path("block")).run()
    no_errors(at)
    steps = at.dataframe[0].value
    assert list(steps["step"])[0] == "input x" and len(steps) == 7
    assert any("reproduces the model's own output" in c.value for c in at.caption)
    lens = at.dataframe[1].value
    assert len(lens) == 31
    at.slider(key="layer").set_value(12).run()
    no_errors(at)


def test_positions_page_relative_property_and_permutation(app):
    at = app.run()
    at.switch_page(page_path("positions")).run()
    no_errors(at)
    relative = next(m.value for m in at.markdown if "largest spread along a diagonal" in m.value)
    spread = float(relative.split("**")[1])
    assert spread < 1e-9  # q_m·k_n depends only on m − n, on the model's real vectors
    assert not at.dataframe  # only the open tab (RoPE angles) runs
    at.session_state["positions_tab_rope"] = "Permutation"  # what a click on the tab does
    at.run()
    perm = at.dataframe[0].value
    at.session_state["positions_tab_rope"] = "RoPE scaling"
    at.run()
    assert not at.dataframe  # the scaling losses wait for a click
    at.select_slider(key="rope_text_tokens").set_value(256).run()  # the shortest: the point holds, half the time
    at.button(key="rope_scaling_run").click().run()
    no_errors(at)
    losses = at.dataframe[0].value
    removed = perm[perm["model"] == "positions removed"].iloc[0, 1]
    kept = perm[perm["model"] != "positions removed"].iloc[0, 1]
    assert removed < 1e-4 < kept
    assert set(losses["scaling"]) == {"none", "linear", "ntk", "yarn", "llama3"}
    mean = losses.set_index("scaling")["mean loss (nats)"]
    # linear interpolation slows every pair, including the fast ones word order depends on: the worst
    # inside the trained context; the frequency-aware schemes stay close to the unscaled model
    assert mean.idxmax() == "linear" and mean["linear"] > mean["none"] + 0.5
    assert all(abs(mean[k] - mean["none"]) < 0.3 for k in ("ntk", "yarn", "llama3"))


# The KV cache & memory page: tests/app/pages/kv_cache/test_kv_cache.py


def _zoo_trained(*names: str) -> bool:
    from txviz.loading.zoo import SHIPPED_ZOO

    return all((SHIPPED_ZOO / name / "eval.json").is_file() for name in names)


@pytest.mark.skipif(not _zoo_trained("moe_top1"), reason="the zoo has no trained MoE variant")
def test_moe_page_picks_a_zoo_variant_for_a_dense_model(dense_zoo_app):
    at = dense_zoo_app.run()
    at.switch_page(page_path("moe")).run()
    no_errors(at)
    assert any("dense FFN" in c.value for c in at.caption)  # a dense model: the zoo's variants instead
    story = chart(at, "moe_map")["data"][0]
    config_layers = len(story["x"])
    assert decode(story["z"]).astype(float).reshape(len(story["y"]), config_layers).max() < 4
    gates_before = chart(at, "moe_gates")["data"][0]["x"]
    layer_slider = next(s for s in at.select_slider if s.key.startswith("moe_layer_"))  # keyed by the routed layers
    layer_slider.set_value(config_layers - 1).run()
    no_errors(at)
    assert chart(at, "moe_gates")["data"][0]["x"] != gates_before  # another layer's router
    assert f"Layer {config_layers - 1}" in chart(at, "moe_gates")["layout"]["title"]["text"]
    at.radio(key="moe_text").set_value("sidebar prompt").run()
    no_errors(at)
    assert chart(at, "moe_map")["data"][0]["y"] != story["y"]  # the prompt's tokens, not the story's


@pytest.mark.skipif(not _zoo_trained("moe_top1", "moe_top1_balanced"), reason="the zoo's top-1 pair is not trained")
def test_moe_page_balanced_router_spreads_over_more_experts(dense_zoo_app):
    at = dense_zoo_app.run()
    at.switch_page(page_path("moe")).run()
    at.session_state["moe_tab"] = "Balanced vs unbalanced"  # what a click on the tab does
    at.run()
    no_errors(at)
    table = next(d.value for d in at.dataframe if "effective experts (mean)" in d.value.columns).set_index("variant")
    effective = table["effective experts (mean)"]
    assert effective["moe_top1_balanced"] > effective["moe_top1"]
    assert table.loc["moe_top1_balanced", "aux loss (mean)"] < table.loc["moe_top1", "aux loss (mean)"]
    if _zoo_trained("moe_top2", "moe_top2_balanced"):
        at.segmented_control(key="moe_pair").set_value("top-2").run()
        no_errors(at)
        pair = next(d.value for d in at.dataframe if "effective experts (mean)" in d.value.columns)
        assert list(pair["variant"]) == ["moe_top2", "moe_top2_balanced"]


@pytest.mark.skipif(not _zoo_trained("moe_top1"), reason="the zoo has no trained MoE variant")
def test_moe_page_on_a_loaded_moe_model():
    from streamlit.testing.v1 import AppTest

    from txviz.loading.zoo import SHIPPED_ZOO

    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["model"] = str(SHIPPED_ZOO / "moe_top1")
    at.query_params["prompt"] = "Mary had a red kite."
    at.run()
    at.switch_page(page_path("moe")).run()
    no_errors(at)
    assert any("The loaded model routes each token to 1 of 4 experts" in c.value for c in at.caption)
    assert any("kite" in label for label in chart(at, "moe_map")["data"][0]["y"])


def test_tradeoffs_page_formulas_and_measurements(app):
    at = app.run()
    at.switch_page(page_path("tradeoffs")).run()
    no_errors(at)
    shapes = at.dataframe[0].value  # the open tab: depth vs width
    budget = shapes["non_embedding_params"]
    assert (budget.max() - budget.min()) / budget.mean() < 0.005 and 30 in set(shapes["n_layers"])
    at.session_state["tradeoffs_tab"] = "Context length"  # what a click on the tab does (only the open one runs)
    at.run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Attention overtakes the FFN at"] == "T* ≈ 2,304 tokens"  # SmolLM2: 2·3·576·1536 / (4·9·64)
    at.toggle(key="to_ctx_causal").set_value(True).run()
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Attention overtakes the FFN at"] == "T* ≈ 4,607 tokens"

    at.session_state["tradeoffs_tab"] = "FlashAttention"
    at.run()
    at.select_slider(key="to_flash_max").set_value(512).run()
    at.button(key="to_flash_run").click().run()
    no_errors(at)
    flash = next(d.value for d in at.dataframe if "SDPA ms" in d.value.columns)
    assert list(flash["tokens"]) == [128, 256, 512] and (flash["max |naive − SDPA|"] < 1e-4).all()
    assert flash["SDPA peak MiB"].iloc[-1] < flash["one score matrix MiB (analytic)"].iloc[-1] < flash["naive peak MiB"].iloc[-1]
    # Parallel vs sequential (reading token by token with the KV cache gives the parallel pass's logits, a
    # property of the cache, not of SmolLM2's weights): the same assertions on the zoo's base model in
    # tests/app/pages/tradeoffs/test_tradeoffs_measured.py (the measurement on SmolLM2 cost ~2.5 CPU s here)
