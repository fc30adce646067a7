"""The KV cache & memory page through AppTest: numbers follow the chosen model after any sequence of
clicks, only the open tab runs, and each tab's figures hold the measured values. The memory calculator
needs no model run, so its tests open the page on the zoo's tiny base model; so do the page's parts that
hold for any model (the cache growth, the per-layer sweep's estimate, run and stop, the KV-head choices
that start again on another model). SmolLM2 runs where its own numbers are the point (MHA triples its
cache and changes nothing; a prompt it ends at once; the cheapest-first path of its layers), and the
browser test (tests/browser/test_kv.py) drives its cache growth and its sweep in chromium."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from app.ui.widgets import byte_size, plain
from tests.helpers.apptest import click_tab, open_at, page_path, pick_model

from tests.helpers.published_hf_configs import LLAMA_3_8B
from tests.helpers.spy import spy
from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.fit import longest_context
from txviz.analysis.kv.presets import PRESETS
from txviz.analysis.kv.report import memory_report

MAIN = str(Path(__file__).resolve().parents[4] / "app" / "main.py")
PAGE = page_path("kv_cache")
ZOO_BASE = str(Path(__file__).resolve().parents[4] / "assets" / "zoo" / "base")
ZOO_MHA = str(Path(ZOO_BASE).parent / "mha")


def open_kv_page(model: str | None = None, prompt: str | None = None):
    """The KV page, opened from the first page as a visitor does (on ``model``; None: the default)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=300)
    if model is not None:
        at.query_params["model"] = model
    if prompt is not None:
        at.query_params["prompt"] = prompt
    at.run()
    at.switch_page(PAGE).run()
    no_errors(at)
    return at


def zoo_prompt() -> str:
    """A prompt the zoo's vocabulary knows (the default prompt's unknown words would add a warning)."""
    from txviz.lab.corpus import sample_text

    return sample_text(3)


def open_default_model_tab(default_model_home, monkeypatch, label: str, prompt: str | None = None):
    """The KV page's tab ``label`` on the default model, opened straight from a link as a click on the tab
    shows it (no run of the Attention page or the calculator first: tests/helpers/apptest.open_at)."""
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    at = open_at("kv_cache", prompt=prompt, timeout=300, state={"kv_tab": label})
    no_errors(at)
    return at


@pytest.fixture
def calculator():
    """The KV page on the zoo's tiny model: the memory calculator reads presets and uploads, not the model."""
    return open_kv_page(ZOO_BASE, zoo_prompt())


def no_errors(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def chart(at, key: str) -> dict:
    for element in at.get("plotly_chart"):
        if element.proto.id and element.proto.id.endswith(f"-{key}"):
            return json.loads(element.proto.spec)
    raise AssertionError(f"no plotly chart with key {key!r}")


def chart_keys(at) -> set[str]:
    return {element.proto.id.rsplit("-", 1)[-1] for element in at.get("plotly_chart")}


def decode(array) -> np.ndarray:
    if isinstance(array, dict) and "bdata" in array:
        values = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
        shape = array.get("shape")
        return values.reshape([int(s) for s in str(shape).split(",")]) if shape else values
    return np.array(array)


def widget(at, kind: str, key: str):
    return next(w for w in at.get(kind) if w.key == key)


def open_tab(at, label: str):
    return click_tab(at, "kv_tab", label)


def per_token_metric(at) -> tuple[str, str]:
    return next((m.label, m.value) for m in at.metric if m.label.startswith("KV bytes per token"))


def kib_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_element: int = 2) -> str:
    """The KV formula by hand: K and V, for every layer and KV head, bf16 by default."""
    return f"{2 * layers * kv_heads * head_dim * bytes_per_element / 1024:,.1f} KiB"


def choose_preset(at, key: str):
    widget(at, "selectbox", "mem_preset").select_index(list(PRESETS).index(key)).run()  # the order shown
    no_errors(at)


# ---- the attention kind follows the model ---------------------------------------------------------------
def test_changing_the_preset_after_choosing_mqa_shows_the_new_models_own_kind(calculator):
    at = calculator
    choose_preset(at, "falcon-7b")
    widget(at, "segmented_control", "mem_kind").set_value("MQA").run()
    assert per_token_metric(at) == ("KV bytes per token (MQA)", kib_per_token(32, 1, 64))
    assert "71 query heads, 1 KV head, head_dim 64" in " ".join(c.value for c in at.caption)  # not "1 KV heads"
    for key in ("mistral-7b-v0.1", "llama-3-8b", "llama-2-7b"):
        choose_preset(at, key)
        published = PRESETS[key]
        kind = memory_model.preset(key).kind
        assert widget(at, "segmented_control", "mem_kind").value == kind
        assert per_token_metric(at) == (f"KV bytes per token ({kind})",
                                        kib_per_token(published["n_layers"], published["kv_heads"], published["head_dim"]))
        assert f"{kind}: {published['n_layers']} layers" in " ".join(c.value for c in at.caption)
    assert per_token_metric(at)[1] == "512.0 KiB"  # Llama 2 7B: the famous half a MiB per token


def test_every_preset_opens_on_its_own_kind_with_the_libraries_bytes(calculator):
    at = calculator
    for key in PRESETS:
        choose_preset(at, key)
        model = memory_model.preset(key)
        assert per_token_metric(at) == (f"KV bytes per token ({model.kind})",
                                        f"{memory.token_kv_bytes(model, 'bf16') / 1024:,.1f} KiB"), key
        assert chart(at, "mem_total")["layout"]["shapes"][0]["y0"] == 80.0


def test_the_calculator_shows_the_memory_report_of_its_inputs_after_each_change(calculator):
    """The metrics and the FLOPs line are the numbers of the report ``txviz memory`` prints for the same
    input, and follow a change of the batch and of the KV dtype."""
    at = calculator
    choose_preset(at, "mistral-7b-v0.1")
    widget(at, "number_input", "mem_gpu").set_value(16.0).run()
    for batch, kv_dtype in ((1, "bf16"), (4, "bf16"), (4, "fp8")):
        widget(at, "number_input", "mem_batch").set_value(batch).run()
        widget(at, "selectbox", "mem_kv_dtype").set_value(kv_dtype).run()
        no_errors(at)
        report = memory_report(memory_model.preset("mistral-7b-v0.1"), gpu_gib=16.0, batch=batch,
                               weight_dtype="bf16", kv_dtype=kv_dtype, prefill_chunk=None)
        longest = report.fit.longest
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Longest context that fits (all three)"] == \
            ("not limited" if longest is None else "none" if longest == 0 else f"{longest:,} tokens")
        assert metrics[f"Total at {report.tokens:,} tokens"] == f"{report.bill.total / memory.GIB:,.2f} GiB"
        assert metrics["KV bytes per token (GQA)"] == byte_size(report.kv_bytes_per_token)
        assert metrics["Past 4,096 tokens, per token"] == byte_size(report.kv_bytes_per_token_past_windows)
        captions = " ".join(c.value for c in at.caption)
        assert f"at position {report.tokens:,} takes {report.flops_per_token / 1e9:,.2f} GFLOPs" in captions


def test_uploading_a_config_after_choosing_mqa_shows_the_uploads_kind_bytes_and_name(calculator):
    at = calculator
    choose_preset(at, "falcon-7b")
    widget(at, "segmented_control", "mem_kind").set_value("MQA").run()
    widget(at, "radio", "mem_source").set_value("Your config.json").run()
    assert not any(w.key == "mem_preset" for w in at.selectbox)  # no stale preset while the upload is in force
    assert "Upload a model's config.json" in " ".join(i.value for i in at.info)
    at.file_uploader[0].set_value(("config.json", json.dumps(LLAMA_3_8B).encode(), "application/json")).run()
    no_errors(at)
    layers, kv_heads = LLAMA_3_8B["num_hidden_layers"], LLAMA_3_8B["num_key_value_heads"]
    head_dim = LLAMA_3_8B["hidden_size"] // LLAMA_3_8B["num_attention_heads"]
    assert per_token_metric(at) == ("KV bytes per token (GQA)", kib_per_token(layers, kv_heads, head_dim))
    caption = " ".join(c.value for c in at.caption)
    assert f"**{plain('LlamaForCausalLM, 8.03 B params, 32 layers × 4096')}** — GQA" in caption  # not just "llama"
    assert plain("uploaded file config.json") in caption

    widget(at, "segmented_control", "mem_kind").set_value("MQA").run()  # a choice on the upload…
    named = {**LLAMA_3_8B, "_name_or_path": "meta-llama/Meta-Llama-3-8B"}
    at.file_uploader[0].set_value(("config.json", json.dumps(named).encode(), "application/json")).run()
    no_errors(at)  # …is forgotten when another file comes
    assert per_token_metric(at) == ("KV bytes per token (GQA)", kib_per_token(layers, kv_heads, head_dim))
    assert "**" + plain("Meta-Llama-3-8B (LlamaForCausalLM, 8.03 B params") in " ".join(c.value for c in at.caption)

    widget(at, "radio", "mem_source").set_value("Preset").run()  # back to the preset: Falcon, its own kind
    no_errors(at)
    assert widget(at, "selectbox", "mem_preset").value == PRESETS["falcon-7b"]["name"]
    assert per_token_metric(at) == ("KV bytes per token (MQA)", kib_per_token(32, 1, 64))


def test_a_broken_upload_says_so_and_shows_no_numbers(calculator):
    at = calculator
    widget(at, "radio", "mem_source").set_value("Your config.json").run()
    at.file_uploader[0].set_value(("config.json", b"{not json", "application/json")).run()
    assert not at.exception
    assert "Could not read config\\.json:" in at.error[0].value  # the file named, as Markdown text
    assert not at.metric and "mem_total" not in chart_keys(at)


def test_calculator_settings_survive_a_visit_to_another_tab(calculator):
    at = calculator
    choose_preset(at, "llama-2-70b")
    widget(at, "segmented_control", "mem_kind").set_value("MQA").run()
    widget(at, "number_input", "mem_gpu").set_value(24.0).run()
    open_tab(at, "Cached vs uncached")
    assert not at.metric
    open_tab(at, "Memory calculator")
    assert widget(at, "selectbox", "mem_preset").value == PRESETS["llama-2-70b"]["name"]
    assert widget(at, "number_input", "mem_gpu").value == 24.0
    assert per_token_metric(at) == ("KV bytes per token (MQA)", kib_per_token(80, 1, 128))


# ---- the whole bill against the GPU ------------------------------------------------------------------
def test_memory_bill_stacks_weights_kv_and_activations_under_the_gpu_line(calculator):
    at = calculator
    choose_preset(at, "llama-2-7b")
    widget(at, "selectbox", "mem_weight_dtype").set_value("fp16").run()
    widget(at, "selectbox", "mem_kv_dtype").set_value("fp16").run()
    widget(at, "number_input", "mem_gpu").set_value(24.0).run()
    no_errors(at)
    spec = chart(at, "mem_total")
    assert [trace["name"] for trace in spec["data"]] == ["weights", "KV cache", "activations"]
    assert spec["layout"]["barmode"] == "stack"
    assert spec["layout"]["shapes"][0]["y0"] == 24.0  # the GPU line
    x = list(spec["data"][0]["x"])
    at_4k = x.index("4K")
    weights, kv, activations = (float(decode(trace["y"])[at_4k]) * memory.GIB for trace in spec["data"])
    params = 6_738_415_616  # Llama 2 7B, counted from its config.json in tests/analysis/kv/test_memory.py
    assert weights == pytest.approx(2 * params)
    assert kv == pytest.approx(2 * 32 * 32 * 128 * 2 * 4096)  # 2 GiB
    assert activations == pytest.approx(4096 * (2 * 4096 + 3 * 4096 + 2 * 11008) * 2 + 32000 * 4)
    metrics = {m.label: m.value for m in at.metric}
    longest = longest_context(memory_model.preset("llama-2-7b"), 24.0, weight_dtype="fp16", kv_dtype="fp16")
    assert metrics["Longest context that fits (all three)"] == f"{longest:,} tokens"
    assert "Activations: the peak of one forward pass" in " ".join(c.value for c in at.caption)


# ---- only the open tab runs; each tab when opened -----------------------------------------------------
def test_a_cold_open_computes_only_the_calculator(calculator):
    at = calculator
    assert at.session_state["kv_tab"] == "Memory calculator"
    assert chart_keys(at) == {"mem_total", "mem_context", "mem_weights", "mem_batch_chart"}
    assert not any(m.label == "KV cache (measured)" for m in at.metric)  # the counterfactual did not run
    assert not any(w.key == "kv_new_tokens" for w in at.slider)  # nor did the generation


def zoo_base_config():
    from txviz.loading import load

    return load(ZOO_BASE).config


def test_cache_growth_tab_animates_the_measured_bytes(calculator):
    """On the zoo's base model: the measured bytes equal the formula's at every step whatever the model
    (SmolLM2's growth replays in chromium, tests/browser/test_kv.py)."""
    at = open_tab(calculator, "Cache growth")
    growth = next(m.value for m in at.markdown if "largest difference over all steps" in m.value)
    assert "**0 bytes**" in growth
    spec = chart(at, "kv_growth")
    slots, measured, formula = spec["data"]
    np.testing.assert_array_equal(decode(measured["y"]).astype(float), decode(formula["y"]).astype(float))
    frames = spec["frames"]
    assert len(frames) == len(decode(formula["x"])) == 32  # one per generated token (or end of text sooner)
    assert [len(decode(f["data"][1]["y"])) for f in frames] == list(range(1, len(frames) + 1))  # growing
    config = zoo_base_config()
    first, last = decode(frames[0]["data"][0]["z"]), decode(frames[-1]["data"][0]["z"])
    assert first.shape == last.shape and first.shape[0] == config.n_layers
    prompt_len = int(decode(formula["x"])[0])
    assert (first > 0).sum(axis=1).tolist() == [prompt_len] * config.n_layers  # the prompt's slots only
    assert (last == 2).sum(axis=1).tolist() == [len(frames) - 1] * config.n_layers  # + the generated ones
    assert [s["label"] for s in spec["layout"]["sliders"][0]["steps"]] == [f["name"] for f in frames]


@pytest.mark.default_model
def test_sharing_tab_repeats_kv_heads_at_three_times_the_memory_and_no_change(default_model_home, monkeypatch):
    from app import cache

    asked = spy(monkeypatch, cache, "get_kv_counterfactual")  # the reports the tab shows
    at = open_default_model_tab(default_model_home, monkeypatch, "Sharing KV heads")
    original = asked.last
    assert original.top1_agreement == 1.0 and original.kv_bytes_variant == original.kv_bytes_original
    widget(at, "segmented_control", "live_kv").set_value(9).run()  # MHA: repeat the KV heads
    no_errors(at)
    repeated = asked.last
    assert asked.last_args[1] == 9 and repeated.kv_bytes_variant == 3 * original.kv_bytes_variant
    assert repeated.top1_agreement == pytest.approx(1.0, abs=5e-4)  # repeating KV heads changes only memory
    assert repeated.mean_kl == pytest.approx(0.0, abs=1e-6)


@pytest.mark.default_model
def test_speed_tab_times_every_requested_token_even_past_end_of_text(default_model_home, monkeypatch):
    at = open_default_model_tab(default_model_home, monkeypatch, "Cached vs uncached",
                                prompt="Tell me a long story about a lighthouse.")  # the model ends it at once
    assert "kv_speed" not in chart_keys(at)  # on request only, saying roughly how long
    assert "They run when you press Measure (roughly " in " ".join(c.value for c in at.caption)
    at.slider(key="kv_speed_tokens").set_value(8).run()
    at.button(key="kv_measure").click().run()
    no_errors(at)
    spec = chart(at, "kv_speed")
    assert [trace["name"] for trace in spec["data"]] == ["with KV cache", "recompute everything"]
    for trace in spec["data"]:
        x, y = decode(trace["x"]).astype(float), decode(trace["y"]).astype(float)
        assert len(y) == 7 and np.all(y > 0)  # 8 tokens, the first one (the prefill) left out
        assert np.array_equal(x, np.arange(x[0], x[0] + 7))
    assert "ms/token" in " ".join(c.value for c in at.caption)


def zoo_sweep(tokens: int):
    """The sweep the page runs on the zoo's base model (merging to 1 KV head), run here by the library."""
    from app.services.texts import shipped_text_ids, shipped_texts
    from txviz.analysis.kv.sharing import layer_sharing
    from txviz.loading import load

    loaded = load(ZOO_BASE)
    ids = shipped_text_ids(loaded, next(iter(shipped_texts())), tokens)
    return layer_sharing(loaded.model, ids, 1)


def test_layer_sweep_says_how_long_before_it_runs_then_measures_every_layer(calculator, monkeypatch):
    """On the zoo's base model (4 layers, 2 KV heads merged to 1): the page says how long, runs on a click,
    shows the library's sweep and keeps it. SmolLM2's sweep starts and stops in chromium
    (tests/browser/test_kv.py); its path is held below (the default model's cheapest-first path)."""
    from app import cache
    from txviz.analysis.kv.sharing import layer_sharing_steps, sweep_seconds
    from app.services.texts import shipped_texts

    config = zoo_base_config()
    measured = spy(monkeypatch, cache, "layer_sharing_step_seconds")  # what the estimate is made of
    at = open_tab(calculator, "Sharing KV heads")
    at.select_slider(key="live_tokens").set_value(128).run()
    assert "layers_kl" not in chart_keys(at)  # on request only
    estimate = next(c.value for c in at.caption if c.value.startswith("About **"))
    steps = layer_sharing_steps(config)
    assert steps == 10  # the original, 4 layers, 5 points of the path (0 … 4 layers merged)
    assert f"{steps} steps over 128 tokens" in estimate
    first, last = measured.last
    assert measured.last_args[1:] == (1, next(iter(shipped_texts())), 128) and first > 0 and last > 0
    seconds = sweep_seconds(config, first, last)
    assert estimate.startswith(f"About **{seconds:.0f} s**")
    assert at.button(key="layers_run").label == f"Measure all {config.n_layers} layers (≈ {seconds:.0f} s)"
    original = next(m for m in at.metric if m.label == "Perplexity")
    at.button(key="layers_run").click().run()
    no_errors(at)
    expected = zoo_sweep(128)
    kl = decode(chart(at, "layers_kl")["data"][0]["y"]).astype(float)
    assert len(kl) == config.n_layers and np.all(kl > 0)
    np.testing.assert_allclose(kl, expected.layer_kl, rtol=1e-4)
    path = at.dataframe[-1].value
    assert list(path["layers merged"]) == expected.path_layers == list(range(config.n_layers + 1))
    per_layer_bytes = 2 * config.head_dim * 4  # K and V of one head, float32
    n_layers, kv_heads = config.n_layers, config.n_kv_heads
    assert list(path["KV bytes / token"]) == [per_layer_bytes * (kv_heads * (n_layers - n) + n)
                                              for n in path["layers merged"]]
    assert path["perplexity"].iloc[0] == pytest.approx(float(original.delta.split()[-1]), abs=0.01)
    assert list(path["perplexity"]) == pytest.approx(expected.path_perplexity, abs=0.006)  # shown to 2 decimals
    at.run()  # remembered: drawn again without a click, no button, no "stopped" note
    assert chart(at, "layers_kl") and not any("Stopped after" in i.value for i in at.info)
    assert not any(b.key == "layers_run" for b in at.button)


@pytest.mark.default_model
def test_the_default_models_cheapest_first_path_raises_its_perplexity_at_every_point(default_model):
    """SmolLM2 (30 layers, 3 KV heads merged to 1) through the library the page calls, on the first 32 tokens
    of the shipped text the page reads (the page's shortest choice is 128: ~18 CPU s for the sweep there,
    ~7 here, most of it per step, not per token): the path merges the cheapest layers first, so its
    perplexity rises at every point, from the original's to all 30 layers merged."""
    from app.services.texts import shipped_text_ids, shipped_texts
    from txviz.analysis.kv.sharing import layer_sharing

    ids = shipped_text_ids(default_model, next(iter(shipped_texts())), 32)
    sweep = layer_sharing(default_model.model, ids, 1)
    assert len(sweep.layer_kl) == default_model.config.n_layers and all(kl > 0 for kl in sweep.layer_kl)
    assert sweep.path_layers == [0, 5, 10, 15, 20, 25, 30]
    assert sweep.path_perplexity[0] == pytest.approx(sweep.perplexity_original)
    assert sweep.path_perplexity == sorted(sweep.path_perplexity)  # monotonic increasing


def test_a_sweep_ended_by_a_click_says_where_it_stopped(calculator):
    """On the zoo's base model: what the page says after a run a click ended (the click itself ends
    SmolLM2's sweep in chromium, tests/browser/test_kv.py)."""
    from txviz.analysis.kv.sharing import layer_sharing_steps

    at = open_tab(calculator, "Sharing KV heads")
    at.session_state["_running_layers"] = {"done": 4}  # what a run that a click interrupted leaves behind
    at.run()
    no_errors(at)
    steps = layer_sharing_steps(zoo_base_config())
    assert f"Stopped after 4 of {steps} steps; nothing was kept." in " ".join(i.value for i in at.info)
    at.run()
    assert not any("Stopped after" in i.value for i in at.info)  # said once


def test_kv_head_choices_start_again_when_the_sidebar_loads_another_model():
    """Two zoo models: MQA and 2-head merges chosen on the 4-KV-head ``mha`` must not carry over to
    ``base`` (2 KV heads), whose own choices are offered instead."""
    at = open_tab(open_kv_page(ZOO_MHA, zoo_prompt()), "Sharing KV heads")
    widget(at, "segmented_control", "live_kv").set_value(1).run()  # MQA on the mha model: 1 of its 4 KV heads
    widget(at, "segmented_control", "layers_kv").set_value(2).run()  # its layers merged to 2, not 1
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Top-1 agreement"] != "100.0%"  # MQA changed the predictions
    pick_model(at, "base").run()  # the zoo's 4-head, 2-KV-head model
    no_errors(at)
    assert widget(at, "segmented_control", "live_kv").value == 2  # its own, not the mha model's MQA choice
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Top-1 agreement"] == "100.0%" and metrics["KV cache (measured)"].endswith("MiB")
    assert widget(at, "segmented_control", "layers_kv").value == 1


def test_weights_that_do_not_fit_are_named_instead_of_a_context(calculator):
    at = calculator
    choose_preset(at, "llama-3-70b")
    weights_gib = memory.weight_bytes(memory_model.preset("llama-3-70b"), "bf16") / memory.GIB
    assert weights_gib > 80
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Longest context that fits (all three)"] == "none"
    assert f"The weights alone ({weights_gib:,.1f} GiB in bf16) do not fit in 80 GiB" in at.warning[0].value
    widget(at, "selectbox", "mem_weight_dtype").set_value("int4").run()  # 33 GiB: now it fits
    assert not at.warning
    assert {m.label: m.value for m in at.metric}["Longest context that fits (all three)"].endswith(" tokens")


def test_the_calculator_works_when_no_model_loads(monkeypatch, tmp_path):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + bytes(60))  # allowed, there, and not a model
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["model"] = str(tmp_path / "broken.gguf")
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert "Could not load the model" in " ".join(e.value for e in at.error), [e.value for e in at.error]
    assert "mem_total" in chart_keys(at)  # the calculator needs no model
    widget(at, "selectbox", "mem_preset").select_index(list(PRESETS).index("llama-2-7b")).run()
    assert not at.exception
    assert per_token_metric(at) == ("KV bytes per token (MHA)", "512.0 KiB")
    at.session_state["kv_tab"] = "Cache growth"  # a tab that runs the model says there is none
    at.run()
    assert not at.exception and "No model loaded" in " ".join(i.value for i in at.info)


def test_a_model_directory_named_in_markdown_is_shown_as_written(tmp_path, monkeypatch):
    """Markdown in a model's own name is shown as written: the sidebar's line and the sharing tab's heading
    show a directory called ``*my* [model](x.y) &lt;b&gt;`` as written, not bold with a link."""
    import shutil

    from markdown_it import MarkdownIt

    name = "*my* [model](x.y) &lt;b&gt;"
    shutil.copytree(ZOO_BASE, tmp_path / name)
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    at = open_tab(open_kv_page(str(tmp_path / name), zoo_prompt()), "Sharing KV heads")
    [line] = [c.value for c in at.sidebar.caption if "layers ·" in c.value]
    assert line.startswith(f"**{plain(name)}** · ")
    rendered = MarkdownIt("commonmark").render(line)
    assert rendered.count("<strong>") == 4 and "<a " not in rendered and "<em>" not in rendered, rendered
    assert f"Live, on the loaded model ({plain(name)})" in [h.value for h in at.subheader]
