"""Bad input in the app: a clear st.warning / st.error on the page, never a traceback. Prompts (empty,
too long, odd characters), URLs (out-of-range layer, a model outside the allowed directories), broken
models inside an allowed directory, the coreference tab's odd sentences, generation over the limits.
What does not depend on the model runs on the zoo's tiny base model (``zoo_env``); what reads SmolLM2's
byte-level tokenizer, its shape or its fallback as the default model runs on it (``env``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.apptest import aim_at, assert_opened, page_path, shown
from tests.helpers.hf_reference import needs_transformers
from gguf import GGMLQuantizationType as Q

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
PAGES = [page_path("attention"), page_path("heads"), page_path("block"), page_path("positions"),
         page_path("kv_cache")]
ZOO = str(Path(__file__).resolve().parents[2] / "assets" / "zoo" / "base")


@pytest.fixture
def zoo_env(monkeypatch):
    """No limit set from outside the test; the app is opened on ``ZOO`` by the test itself."""
    for name in ("TXVIZ_MAX_TOKENS", "TXVIZ_MAX_LONG_TOKENS", "TXVIZ_MEMORY_BUDGET", "TXVIZ_MAX_NEW_TOKENS", "TXVIZ_MODEL_DIRS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def env(default_model_home, zoo_env):
    """As ``zoo_env``, with the default model fetched into the session's home."""
    zoo_env.setenv("TXVIZ_HOME", str(default_model_home))
    return zoo_env


def known_prompt() -> str:
    """A prompt every word of which the zoo's vocabulary knows (no unknown-word warning)."""
    from txviz.lab.corpus import sample_text

    return sample_text(3)


def app_run(params: dict | None = None, page: str | None = None, prompt: str | None = None,
            state: dict | None = None):
    """The app run once with the link's ``params``, on ``page``, with ``state`` set before that run (a tab
    open, as a click on it shows it); then ``prompt`` typed, if given."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=300)
    for key, value in (params or {}).items():
        at.query_params[key] = value
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if page:  # opened on the page as a link to it does: no run of the Attention page first
        aim_at(at, Path(page).parent.name)
    at.run()
    if page:
        assert_opened(at, Path(page).parent.name)
    if prompt is not None:
        at.sidebar.text_area(key="prompt").input(prompt).run()
    return at


def kv_tab(at, label: str):
    """Open a tab of the KV page (only the open one runs), as a click on it does."""
    at.session_state["kv_tab"] = label
    return at.run()


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def texts(elements) -> str:
    return shown("\n".join(e.value for e in elements))


# ---- prompts ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("page", PAGES)
def test_empty_and_blank_prompts_warn_on_every_page(zoo_env, page):
    at = app_run({"model": ZOO}, page=page, prompt=" \n\t ")  # typed: a link with a blank prompt opens the default one
    no_exception(at)
    if page == page_path("kv_cache"):  # the calculator needs no prompt: it opens first and is there
        assert any(el.proto.id and "mem_context" in el.proto.id for el in at.get("plotly_chart"))
        kv_tab(at, "Cache growth")
    assert "empty" in texts(at.warning)
    if page == page_path("kv_cache"):
        kv_tab(at, "Cached vs uncached").button(key="kv_measure").click().run()
        no_exception(at)


@pytest.mark.default_model
def test_a_prompt_over_the_token_limit_says_the_count_the_limit_and_the_knob(env):
    env.setenv("TXVIZ_MAX_TOKENS", "16")
    env.setenv("TXVIZ_MAX_LONG_TOKENS", "20")
    long_prompt = "The trophy didn't fit in the suitcase because it was too big, so she left it at home."
    at = app_run(prompt=long_prompt)  # 23 tokens: over both
    no_exception(at)
    assert "23 tokens; this server runs at most 20 (TXVIZ_MAX_LONG_TOKENS)" in texts(at.warning)
    at.switch_page(page_path("heads")).run()  # a page that needs every map names its own limit
    no_exception(at)
    warning = texts(at.warning)
    assert "23 tokens; this server runs at most 16 (TXVIZ_MAX_TOKENS)" in warning
    assert "The Attention page reads up to 20 (TXVIZ_MAX_LONG_TOKENS)" in warning
    at.switch_page(page_path("kv_cache")).run()  # generation refuses the same prompt, the page stays up
    kv_tab(at, "Cache growth")
    no_exception(at)
    assert "TXVIZ_MAX_TOKENS" in texts(at.warning)
    kv_tab(at, "Cached vs uncached").button(key="kv_measure").click().run()
    no_exception(at)


def test_a_prompt_longer_than_the_models_context(zoo_env):
    at = app_run({"model": ZOO, "prompt": " ".join(["Mary met John ."] * 60)})  # the zoo model reads 128 tokens
    no_exception(at)
    assert "the model's context is 128 tokens" in texts(at.warning)
    at.switch_page(page_path("kv_cache")).run()
    kv_tab(at, "Cache growth")
    no_exception(at)
    assert "context is 128" in texts(at.warning)


@pytest.mark.default_model
def test_over_the_memory_budget_is_refused_with_the_estimate(env):
    env.setenv("TXVIZ_MEMORY_BUDGET", "100KiB")
    at = app_run()
    no_exception(at)
    assert "Refused: tracing 16 tokens: about" in texts(at.warning)
    assert "above this server's budget of 100.0 KiB per request (TXVIZ_MEMORY_BUDGET)" in texts(at.warning)


@pytest.mark.default_model
def test_fixed_size_analyses_are_held_to_the_budget_too(env):
    # enough for the prompt's traces, not for hundreds of tokens with full logits
    from app import cache

    # scalings an earlier test scored are shown to anyone, with no run to refuse: that store only is emptied
    # (st.cache_resource.clear() also dropped this worker's loaded models and traces: the next tests loaded
    # and traced them again)
    cache._shared("scaling_losses").clear()
    env.setenv("TXVIZ_MEMORY_BUDGET", "40MiB")
    at = app_run(page=page_path("positions"))
    no_exception(at)
    assert any(el.proto.id and "rope_angles" in el.proto.id for el in at.get("plotly_chart"))  # the open tab
    at.session_state["positions_tab_rope"] = "RoPE scaling"  # what a click on the tab does
    at.run()
    no_exception(at)
    warning = texts(at.warning)
    assert "Refused: scoring 512 tokens under 5 scalings" in warning and "(TXVIZ_MEMORY_BUDGET)" in warning
    assert all(b.key != "rope_scaling_run" for b in at.button)  # refused before it is offered
    assert any(el.proto.id and "rope_scaled_freqs" in el.proto.id for el in at.get("plotly_chart"))  # the rest is there
    at.switch_page(page_path("kv_cache")).run()
    no_exception(at)
    assert any(el.proto.id and "mem_context" in el.proto.id for el in at.get("plotly_chart"))  # needs no model run
    kv_tab(at, "Sharing KV heads")
    assert "Refused: comparing 256 tokens with 3 KV heads" in texts(at.warning)
    at.switch_page(page_path("heads")).run()
    no_exception(at)
    assert not at.warning  # the induction test (101 tokens) fits
    assert any(el.proto.id and "det_ind" in el.proto.id for el in at.get("plotly_chart"))


def test_a_prompt_over_the_character_limit_from_the_url(zoo_env):
    zoo_env.setenv("TXVIZ_MAX_PROMPT_CHARS", "50")
    at = app_run({"model": ZOO, "prompt": "word " * 40})
    no_exception(at)
    assert "200 characters; at most 50" in texts(at.warning)


@pytest.mark.default_model
@pytest.mark.parametrize("prompt", ["NUL\x00in the middle", "\x1b[31mred\x1b[0m\x07\x08", "😀👍🏽 emoji 🇫🇷",
                                    "שלום עולם مرحبا", "漢字とかなの文。中文句子", "e\u0301\u200b\u202eabc",
                                    "<script>alert(1)</script><img src=x onerror=alert(2)>", "a"])
def test_odd_text_is_traced_and_shown_escaped(env, prompt):
    at = app_run({"bos": "none"}, prompt=prompt)
    no_exception(at)
    assert not at.error and not at.warning
    strip = next(m.value for m in at.markdown if "token 0" in m.value)
    assert "<script>" not in strip and "<img" not in strip
    at.switch_page(page_path("heads")).run()  # one-token prompts had a k-back input out of range
    no_exception(at)


# ---- the URL ------------------------------------------------------------------------------------------
@pytest.mark.default_model
@pytest.mark.parametrize("params", [{"layer": "-5"}, {"head": "-1", "layer": "999"}, {"layer": "abc", "head": "1.5"},
                                    {"bos": "<evil>"}, {"model": ""}])
def test_out_of_range_url_values_are_brought_inside(env, params):
    at = app_run(params)
    no_exception(at)
    assert not at.error
    layer, head = at.session_state["layer"], at.session_state["head"]
    assert 0 <= layer < 30 and 0 <= head < 9


@pytest.mark.default_model
def test_a_model_outside_the_allowed_directories_is_never_loaded(env, tmp_path):
    config = tiny()
    outside = write_gguf(tmp_path / "outside.gguf", config, weights_of(config))
    for path in (str(outside), "/etc/passwd", f"{ZOO}/../../../../etc"):
        at = app_run({"model": path})
        no_exception(at)
        assert "outside the allowed model directories" in texts(at.error)
        assert not any("tiny-llama" in c.value or "outside.gguf" in c.value for c in at.sidebar.caption)


# ---- broken models inside an allowed directory ----------------------------------------------------------
def _gguf_cases(folder: Path) -> dict[str, str]:
    config = tiny()
    good = write_gguf(folder / "good.gguf", config, weights_of(config), qtype=Q.Q8_0)
    data = good.read_bytes()
    (folder / "truncated.gguf").write_bytes(data[: len(data) // 2])
    (folder / "garbage.gguf").write_bytes(b"GGUF" + bytes(range(256)) * 8)
    (folder / "empty.gguf").write_bytes(b"")
    write_gguf(folder / "gpt2_arch.gguf", config, weights_of(config), arch="gpt2")
    (folder / "no_config").mkdir()
    (folder / "no_config" / "README.txt").write_text("not a model")
    (folder / "weights.bin").write_bytes(b"\x80\x04pickle")
    return {name: str(folder / name) for name in ("truncated.gguf", "garbage.gguf", "empty.gguf", "gpt2_arch.gguf",
                                                  "no_config", "weights.bin", "absent.gguf")}


def _hf_cases(folder: Path) -> dict[str, str]:
    from tests.helpers.broken_checkpoints import BROKEN

    cases = {}
    for name in ("corrupt_safetensors", "unsupported_architecture", "quantized", "kv_heads_mismatch",
                 "config_huge", "config_not_json", "only_pytorch_model_bin"):
        (folder / name).mkdir()
        BROKEN[name][0](folder / name)
        cases[name] = str(folder / name)
    return cases


def _zoo_cases(folder: Path) -> dict[str, str]:
    """The lab's own format (config.json marked txviz_format) with a config a file could hold."""
    import json

    cases = {}
    for name, change in {"zoo_odd_positions": {"positions": "weird"}, "zoo_rope_list": {"rope_scaling": [1]},
                         "zoo_heads_text": {"n_heads": "4"}}.items():
        shutil.copytree(ZOO, folder / name)
        config = json.loads((folder / name / "config.json").read_text())
        (folder / name / "config.json").write_text(json.dumps({**config, **change}))
        cases[name] = str(folder / name)
    return cases


@pytest.fixture(scope="module")
def broken_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    return folder, {**_gguf_cases(folder), **_hf_cases(folder), **_zoo_cases(folder)}


@pytest.mark.default_model
@needs_transformers  # the broken checkpoints are built with transformers: on its worker, which imports it anyway
def test_broken_models_in_an_allowed_directory_show_an_error(env, broken_models):
    folder, cases = broken_models
    env.setenv("TXVIZ_MODEL_DIRS", str(folder))
    for name, path in cases.items():
        at = app_run({"model": path})
        no_exception(at)
        assert at.error, name
        if name == "absent.gguf":  # refused before loading: the default model is shown instead
            assert "no such file" in texts(at.error)
        else:
            assert any("No model loaded" in i.value for i in at.info), name
    assert not (folder / "only_pytorch_model_bin" / "UNPICKLED").exists()


@pytest.mark.default_model
@needs_transformers  # broken_models, built once, on the transformers worker (tests/conftest.py)
def test_the_path_box_with_a_corrupt_file_and_a_path_outside(env, broken_models):
    folder, cases = broken_models
    env.setenv("TXVIZ_MODEL_DIRS", str(folder))
    at = app_run()
    at.sidebar.selectbox(key="model_choice").set_value("Path…").run()
    at.sidebar.text_input(key="model_path").input(cases["truncated.gguf"]).run()
    no_exception(at)
    assert "truncated or corrupt" in texts(at.error)
    at.sidebar.text_input(key="model_path").input(f"{folder}/../../../etc/passwd").run()
    no_exception(at)
    assert "outside the allowed model directories" in texts(at.error)
    assert at.session_state["model"] == "default"  # refused: the default model is shown, and says so
    at.sidebar.text_input(key="model_path").input(str(folder / ("x" * 4000))).run()
    no_exception(at)
    assert "File name too long" in texts(at.error)


# ---- the coreference tab ------------------------------------------------------------------------------
def open_coreference(at):
    """Open the Heads page's Coreference tab (only the open tab runs), as a click on it does."""
    at.session_state["heads_tab"] = "Coreference"
    return at.run()


@pytest.mark.default_model
@pytest.mark.parametrize("sentence,expect", [
    ("", "Write a sentence"), ("she", "Write a sentence"), ("漢字 かな 中文", None), ("😀 😀 😀 she", "Write a sentence"),
    ("<|im_end|> Mary met John and she smiled", None), ("Mary Mary Mary she", None),
    ("word " * 2000, "TXVIZ_MAX_TOKENS"), ("Mary met John and she smiled. " * 12, "at most 60 words"),
])
def test_coreference_tab_with_odd_sentences(env, sentence, expect):
    if len(sentence) > 300:  # the box takes 300 characters: a longer text can only come from a link
        at = app_run(params={"coref_text": sentence}, page=page_path("heads"))
    else:
        at = open_coreference(app_run(page=page_path("heads")))
        at.text_input(key="coref_text").input(sentence).run()
    no_exception(at)
    if expect:
        assert expect in texts(at.info) + texts(at.warning)


def coref_strip(at, name: str):
    """The Coreference tab's strip of clickable words ``coref_<name>_<hash of the sentence>``."""
    return next(w for w in at.get("button_group") if w.key and w.key.startswith(f"coref_{name}_"))


@pytest.mark.default_model
def test_coreference_tab_pronoun_inside_a_special_token_or_among_the_candidates(env):
    at = open_coreference(app_run(page=page_path("heads")))
    at.text_input(key="coref_text").input("Mary met John <|im_end|> and she smiled").run()
    coref_strip(at, "pronoun").set_value(3).run()  # "im_end": inside a special token, no ordinary token
    no_exception(at)
    coref_strip(at, "candidates").set_value([0, 2]).run()  # both before it: the special token is what is refused
    no_exception(at)
    assert "no ordinary token covers" in texts(at.warning)
    coref_strip(at, "pronoun").set_value(5).run()  # "she", with a candidate equal to... itself
    coref_strip(at, "candidates").set_value([0, 5]).run()
    no_exception(at)
    assert "other than the pronoun" in texts(at.info)
    coref_strip(at, "deciding").set_value(0).run()  # a deciding word that is also a candidate ("Mary")
    coref_strip(at, "candidates").set_value([0, 2]).run()
    next(r for r in at.radio if r.key.startswith("coref_query_")).set_value("deciding word").run()
    no_exception(at)
    assert "contains the pronoun" in texts(at.warning)


# ---- settings ------------------------------------------------------------------------------------------
def test_limits_from_secrets_override_the_environment(zoo_env):
    from streamlit.testing.v1 import AppTest

    zoo_env.setenv("TXVIZ_MAX_TOKENS", "4096")
    zoo_env.setenv("TXVIZ_MAX_LONG_TOKENS", "4096")
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["model"] = ZOO
    at.query_params["prompt"] = known_prompt()  # more than 9 tokens
    at.secrets["TXVIZ_MAX_TOKENS"] = 8
    at.secrets["TXVIZ_MAX_LONG_TOKENS"] = "9"
    at.run()
    no_exception(at)
    assert "at most 9 (TXVIZ_MAX_LONG_TOKENS)" in texts(at.warning)
    at.switch_page(page_path("positions")).run()
    no_exception(at)
    assert "at most 8 (TXVIZ_MAX_TOKENS)" in texts(at.warning)


def test_a_malformed_setting_stops_the_app_with_its_name(zoo_env):
    zoo_env.setenv("TXVIZ_MEMORY_BUDGET", "plenty")
    at = app_run({"model": ZOO})
    no_exception(at)
    assert "txviz is misconfigured: TXVIZ_MEMORY_BUDGET='plenty'" in texts(at.error)


def test_a_limit_of_one_new_token_keeps_the_kv_page_working(zoo_env):
    zoo_env.setenv("TXVIZ_MAX_NEW_TOKENS", "1")
    at = app_run({"model": ZOO, "prompt": known_prompt()}, page=page_path("kv_cache"), state={"kv_tab": "Cache growth"})
    no_exception(at)
    assert not at.warning
    assert any(el.proto.id and "kv_growth" in el.proto.id for el in at.get("plotly_chart"))


@pytest.mark.default_model
def test_characters_the_vocabulary_lacks_are_named_and_a_prompt_of_only_those_warns(env):
    at = app_run({"bos": "none"}, prompt="a\x1db")
    no_exception(at)
    assert "left out of what the model sees: U+001D" in texts(at.warning)
    at.sidebar.text_area(key="prompt").input("\x1d\x04").run()
    no_exception(at)
    assert "No token is left of the prompt" in texts(at.warning)
