"""The Positions page shows what the loaded model uses, per position scheme, on the zoo's tiny models:
RoPE sections only for RoPE, ALiBi measured on an ALiBi model (bias, with and without it), the learned
table for learned positions, and for no positions what the causal mask gives. Switching the model in
the sidebar after interacting leaves no stale widget of the old scheme."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.helpers.apptest import aim_at, app_on, assert_opened, chart, chart_ids, decode, has_chart, no_errors, open_at, pick_model, texts
from txviz.loading.zoo import SHIPPED_ZOO

PROMPT = "Michael Turner had a red kite. Then Michael Turner went to the park. He took his red kite."
ROPE_CHARTS = ("rope_angles", "rope_waves", "rope_path", "rope_relative", "rope_scaled_freqs", "rope_scaling_loss")


def trained(name: str) -> bool:
    return (SHIPPED_ZOO / name / "eval.json").is_file()


pytestmark = pytest.mark.skipif(not all(trained(n) for n in ("base", "alibi", "learned", "no_positions")),
                                reason="the zoo's position variants are not trained")


def positions_page(name: str, rope_tab: str | None = None):
    """The Positions page on the zoo variant ``name``; a RoPE model's page open on its tab ``rope_tab``
    (its key set before the first run, as a click on the tab shows it)."""
    at = open_at("positions", str(SHIPPED_ZOO / name), PROMPT,
                 state={"positions_tab_rope": rope_tab} if rope_tab else None)
    no_errors(at)
    return at


def open_tab(at, label: str):
    """What a click on the tab does: the page keys its tabs by the position scheme."""
    scheme = {"RoPE": "rope", "ALiBi": "alibi", "Learned": "learned", "No": "none"}
    key = next(f"positions_tab_{v}" for k, v in scheme.items() if tab_labels(at)[0].startswith(k))
    at.session_state[key] = label
    at.run()
    no_errors(at)
    return at


def tab_labels(at) -> list[str]:
    return [t.label for t in at.tabs]


def rope_widgets(at) -> list[str]:
    keys = [getattr(w, "key", None) or "" for kind in ("slider", "selectbox", "select_slider", "button")
            for w in at.get(kind)]
    return [k for k in keys if k.startswith("rope_")]


def test_rope_model_shows_rope_and_the_alibi_what_if_beside_the_real_map():
    at = positions_page("base")
    assert tab_labels(at) == ["RoPE angles", "RoPE scaling", "ALiBi what-if", "Permutation"]
    assert "A real query, rotated" in texts(at) and "Only the distance matters" in texts(at)
    assert not has_chart(at, "alibi_") and not at.dataframe  # the closed tabs did not run
    open_tab(at, "ALiBi what-if")
    bias = chart(at, "alibi_bias")["data"][0]
    assert bias["colorbar"]["title"]["text"] == "bias" and "bias" in bias["hovertemplate"]
    real = decode(chart(at, "alibi_real")["data"][0]["z"]).astype(float)
    what_if = decode(chart(at, "alibi_overlay")["data"][0]["z"]).astype(float)
    assert real.shape == what_if.shape and not np.allclose(np.nan_to_num(real), np.nan_to_num(what_if))
    np.testing.assert_allclose(np.nansum(real, axis=1), 1.0, atol=1e-5)  # the unbiased map is a real softmax
    assert "what-if" in texts(at)


def test_rope_scaling_runs_only_when_asked_with_a_time_estimate():
    at = positions_page("base", "RoPE scaling")
    assert not has_chart(at, "rope_scaling_loss")  # nothing scored on opening the tab
    button = at.button(key="rope_scaling_run")
    assert "≈" in button.label and "takes about" in texts(at)
    button.click().run()
    no_errors(at)
    assert has_chart(at, "rope_scaling_loss")
    losses = next(d.value for d in at.dataframe if "scaling" in d.value.columns)
    assert set(losses["scaling"]) == {"none", "linear", "ntk", "yarn", "llama3"}
    assert losses.set_index("scaling")["mean loss (nats)"].nunique() > 1  # five different curves, not one
    at.run()  # remembered: drawn again without a click
    assert has_chart(at, "rope_scaling_loss")


def scaling_caption(at) -> str:
    return next(c.value for c in at.caption if "scalings takes about" in c.value)


def test_the_scaling_estimate_is_measured_here_first_on_a_short_forward_then_on_a_scored_scaling():
    from app import cache

    cache._shared("scaling_step_times").clear()  # as on a server that has scored no scaling yet
    at = positions_page("base", "RoPE scaling")
    at.select_slider(key="rope_factor").set_value(16.0).run()  # a factor no other test scores
    assert "a short forward of this model ran at" in scaling_caption(at) and "GFLOP/s here" in scaling_caption(at)
    assert "assumed" not in texts(at)  # no uncalibrated figure
    at.button(key="rope_scaling_run").click().run()
    no_errors(at)
    at.select_slider(key="rope_factor").set_value(2.0).run()  # the same text: now the step just measured
    assert re.search(r"one scaling of \d+ tokens took \d+\.\d s here", scaling_caption(at)), scaling_caption(at)


def test_a_scaling_run_stopped_between_scalings_says_what_was_kept_and_scores_only_the_rest():
    from app import cache

    at = positions_page("base", "RoPE scaling")
    at.select_slider(key="rope_factor").set_value(8.0).run()
    button = at.button(key="rope_scaling_run")
    assert button.label.startswith("Score the text under 5 scalings (≈ ")
    run = (at.session_state["model"], at.selectbox(key="rope_text").value, 8.0, 512)
    # what a run that a Stop click ended after two scalings leaves: those two scored, the flag still set
    for kind in ("none", "linear"):
        cache.score_scaling(*run, kind)
    at.session_state["_running_rope_scaling"] = run
    at.run()
    no_errors(at)
    said = " ".join(i.value for i in at.info)
    assert "Scoring '" in said and ("at factor 8 was stopped by a click (the Stop button, or any other click while it "
                                    "ran, such as a changed setting) after 2 of the 5 scalings") in said
    assert "“none” (no scaling), “linear” were scored and kept." in said
    assert "A new run scores only the other 3: “ntk”, “yarn”, “llama3”." in said
    assert at.button(key="rope_scaling_run").label.startswith("Score the text under the other 3 scalings (≈ ")
    assert not has_chart(at, "rope_scaling_loss")
    at.button(key="rope_scaling_run").click().run()
    no_errors(at)
    assert not [b for b in at.button if b.key == "rope_scaling_stop"]  # its Stop went with the finished run
    losses = next(d.value for d in at.dataframe if "scaling" in d.value.columns)
    assert list(losses["scaling"]) == ["none", "linear", "ntk", "yarn", "llama3"]
    at.run()
    assert has_chart(at, "rope_scaling_loss") and not any("was stopped" in i.value for i in at.info)  # said once


def test_a_scaling_run_stopped_before_its_first_scaling_says_nothing_was_kept():
    at = positions_page("base", "RoPE scaling")
    at.select_slider(key="rope_factor").set_value(8.0).run()
    at.select_slider(key="rope_text_tokens").set_value(256).run()  # a run no other test scores
    at.session_state["_running_rope_scaling"] = (at.session_state["model"], at.selectbox(key="rope_text").value, 8.0, 256)
    at.run()
    no_errors(at)
    said = " ".join(i.value for i in at.info)
    assert ("was stopped by a click (the Stop button, or any other click while it ran, such as a changed setting) "
            "before its first scaling was scored: nothing was kept.") in said
    assert "A new run scores all 5 scalings." in said and "none" not in said.replace("nothing", "")


def test_alibi_model_shows_its_measured_bias_with_and_without_it_and_no_rope():
    at = positions_page("alibi")
    assert tab_labels(at) == ["ALiBi slopes and bias", "Permutation"]
    assert not any(key in i for i in chart_ids(at) for key in ROPE_CHARTS + ("alibi_overlay",))
    assert "A real query, rotated" not in texts(at) and "Only the distance matters" not in texts(at)
    assert not rope_widgets(at)
    assert chart(at, "alibi_bias")["data"][0]["colorbar"]["title"]["text"] == "bias"
    real = decode(chart(at, "alibi_real")["data"][0]["z"]).astype(float)
    unbiased = decode(chart(at, "alibi_unbiased")["data"][0]["z"]).astype(float)
    assert not np.allclose(np.nan_to_num(real), np.nan_to_num(unbiased))
    heads = next(d.value for d in at.dataframe if "slope (measured)" in d.value.columns)
    np.testing.assert_allclose(heads["slope (measured)"], [0.25, 0.0625, 0.015625, 0.00390625], rtol=1e-5)
    # the bias pulls attention toward recent tokens: every head looks less far back with it
    assert (heads["mean distance looked back"] <= heads["…without the bias"] + 1e-6).all()


def test_learned_model_shows_its_position_table():
    at = positions_page("learned")
    assert tab_labels(at) == ["Learned position table", "Permutation"]
    assert not any(key in i for i in chart_ids(at) for key in ROPE_CHARTS + ("alibi_",))
    similarity = decode(chart(at, "learned_similarity")["data"][0]["z"]).astype(float)
    assert similarity.shape == (128, 128)
    np.testing.assert_allclose(np.diag(similarity), 1.0, atol=1e-5)
    assert chart(at, "learned_similarity")["data"][0]["colorbar"]["title"]["text"] == "cosine"
    assert "128 rows" in texts(at)
    permutation = open_tab(at, "Permutation").dataframe[-1].value.set_index("model").iloc[:, 0]
    assert permutation["with the model's positions"] > 1e-3 > permutation["positions removed"]


def test_no_position_model_says_so_and_shows_what_the_mask_gives():
    at = positions_page("no_positions")
    assert tab_labels(at) == ["No positions: the causal mask", "Permutation"]
    assert not any(key in i for i in chart_ids(at) for key in ROPE_CHARTS + ("alibi_",))
    assert "no position scheme" in texts(at)
    series = {trace["name"]: decode(trace["y"]).astype(float) for trace in chart(at, "nopos_entropy")["data"]}
    bound = series.pop("log(i + 1): even over all visible keys")
    for entropy in series.values():  # no head spreads wider than evenly over what it can see
        assert np.all(entropy <= bound + 1e-4)
    permutation = open_tab(at, "Permutation").dataframe[-1].value.iloc[:, 1]
    assert (permutation < 1e-4).all()  # nothing to remove: both score sets are permutations


def test_switching_from_a_rope_to_an_alibi_model_leaves_no_rope_widgets():
    at = positions_page("base", "RoPE scaling")
    at.select_slider(key="rope_factor").set_value(8.0).run()
    open_tab(at, "RoPE angles")
    at.slider(key="rope_pair").set_value(3).run()
    at.slider(key="rope_span").set_value(128).run()
    no_errors(at)
    assert "pair 3" in chart(at, "rope_path")["layout"]["title"]["text"]
    pick_model(at, "alibi").run()
    no_errors(at)
    assert tab_labels(at) == ["ALiBi slopes and bias", "Permutation"]
    assert not rope_widgets(at)
    assert not any(key in i for i in chart_ids(at) for key in ROPE_CHARTS)
    assert "A real query, rotated" not in texts(at)
    assert has_chart(at, "alibi_unbiased")


def test_the_bias_map_leaves_the_future_keys_grey_and_is_never_positive():
    at = positions_page("alibi")
    z = decode(chart(at, "alibi_bias")["data"][0]["z"]).astype(float)
    future = np.triu(np.ones_like(z, dtype=bool), 1)
    assert np.isnan(z[future]).all() and np.nanmax(z) == 0 and np.nanmin(z) < 0


def test_the_token_pickers_follow_a_new_prompt():
    at = positions_page("base")
    at.selectbox(key="rope_token").set_value(2).run()
    assert "Turner" in chart(at, "rope_path")["layout"]["title"]["text"]
    at.sidebar.text_area(key="prompt").input("Mary had a cat.").run()
    no_errors(at)
    picker = at.selectbox(key="rope_token")
    assert len(picker.options) == 6 and picker.value == 5  # <|endoftext|> Mary had a cat . : the last token again
    assert at.selectbox(key="rope_key_token").value == 3


@pytest.mark.parametrize("name", ["base", "alibi", "learned", "no_positions"])
def test_a_one_token_prompt_breaks_no_section(name):
    at = aim_at(app_on(str(SHIPPED_ZOO / name), "Mary"), "positions")  # opened on it, as its address opens it
    at.query_params["bos"] = "none"
    at.run()
    assert_opened(at, "positions")
    no_errors(at)
    for label in tab_labels(at)[1:]:
        open_tab(at, label)


def test_the_token_pickers_tell_the_browser_their_new_token_after_a_new_prompt():
    # a value the script falls back to is not sent to a picker the browser already shows: only a value set
    # through the state is (set_value), else chromium kept showing the old prompt's "15:." beside a chart of
    # the new prompt's last token
    at = positions_page("base")
    at.sidebar.text_area(key="prompt").input("Mary had a cat.").run()
    no_errors(at)
    for key, index in (("rope_token", 5), ("rope_key_token", 3)):
        picker = at.selectbox(key=key)
        assert picker.value == index and picker.proto.set_value and picker.proto.raw_value == picker.options[index], key


def test_the_scoring_progress_names_the_scaling_none_as_no_scaling(monkeypatch):
    # the bar read "Scoring none… about 61 s left" in chromium: as if nothing were being scored
    from streamlit.delta_generator import DeltaGenerator

    import streamlit as st

    said, progress, bar = [], DeltaGenerator.progress, st.progress
    monkeypatch.setattr(DeltaGenerator, "progress",  # the bar's updates
                        lambda self, value, text=None: said.append(text) or progress(self, value, text=text))
    monkeypatch.setattr(st, "progress", lambda value, text=None: said.append(text) or bar(value, text=text))  # its start
    at = positions_page("base", "RoPE scaling")
    at.select_slider(key="rope_factor").set_value(2.0).run()
    at.select_slider(key="rope_text_tokens").set_value(256).run()  # a length no other test scores
    at.button(key="rope_scaling_run").click().run()
    no_errors(at)
    texts_said = [t for t in said if t]
    assert texts_said[0].startswith("Scoring “none” (no scaling)…"), texts_said
    assert any(t.startswith("“none” (no scaling) scored (1 of 5)") for t in texts_said), texts_said
