"""The sidebar on the zoo's word-level vocabulary: a prompt with words the vocabulary lacks is warned
about, with the count, and one click puts a sentence the model knows into the prompt; the model picker
lists the default model once and describes each zoo variant in one line."""

from __future__ import annotations

import pytest

from app.ui.widgets import plain
from tests.helpers.apptest import app_on, no_errors
from txviz.lab.corpus import sample_text
from txviz.loading.zoo import SHIPPED_ZOO

UNKNOWN_PROMPT = "The trophy didn't fit in the suitcase because it was too big."

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "alibi" / "eval.json").is_file(), reason="the zoo is not trained")


def unknown_warnings(at) -> list[str]:
    return [w.value for w in at.sidebar.warning if "unknown" in w.value]


def test_unknown_words_are_counted_and_a_known_sentence_replaces_them():
    at = app_on(str(SHIPPED_ZOO / "alibi"), UNKNOWN_PROMPT).run()
    no_errors(at)
    [warning] = unknown_warnings(at)
    assert "10 of 16 tokens are unknown" in warning  # <|endoftext|> + 15 tokens, 10 of them <|unk|>
    assert "trophy" in warning and "suitcase" in warning and "induction" in warning
    at.sidebar.button(key="use_sample").click().run()
    no_errors(at)
    assert at.sidebar.text_area(key="prompt").value == sample_text(0)
    assert not unknown_warnings(at)


def test_a_prompt_the_vocabulary_knows_has_no_warning():
    at = app_on(str(SHIPPED_ZOO / "alibi"), sample_text(3)).run()
    no_errors(at)
    assert not unknown_warnings(at) and not at.sidebar.get("button")


@pytest.mark.default_model
def test_picker_lists_the_default_model_once_and_describes_the_zoo(default_model_home, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))  # the fetched .gguf lies in the cache directory
    assert any(p.suffix == ".gguf" for p in default_model_home.iterdir())
    at = app_on(str(SHIPPED_ZOO / "alibi")).run()
    no_errors(at)
    options = at.sidebar.selectbox(key="model_choice").options
    assert sum("SmolLM2" in o for o in options) == 1
    alibi = next(o for o in options if o.startswith("alibi — "))
    assert "ALiBi" in alibi and "4 layers" in alibi and "k params" in alibi
    assert at.sidebar.selectbox(key="model_choice").value == alibi
    zoo = [o for o in options if " — " in o]
    assert len(zoo) == sum(1 for d in SHIPPED_ZOO.iterdir() if (d / "config.json").is_file())


def test_a_broken_file_is_listed_with_its_reason_and_a_good_one_still_loads(tmp_path, monkeypatch):
    """Files the app offers are checked by their header (in a capped child process) when
    discovered; a broken one is shown with its reason and is not among the choices."""
    import struct

    from gguf import GGUFValueType as T

    from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
    from txviz.loading import preflight

    config = tiny()
    good = write_gguf(tmp_path / "good.gguf", config, weights_of(config))
    broken = write_gguf(tmp_path / "claims_2_62.gguf", config, weights_of(config),
                        metadata={"test.items": ([1, 2, 3], T.ARRAY)})
    data = bytearray(broken.read_bytes())
    struct.pack_into("<Q", data, data.index(b"test.items") + len(b"test.items") + 8, 2 ** 62)  # the item count
    broken.write_bytes(bytes(data))
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))
    preflight.forget()
    at = app_on(str(good)).run()
    no_errors(at)
    options = at.sidebar.selectbox(key="model_choice").options
    assert any(o.startswith("good.gguf") for o in options)
    assert not any("claims_2_62" in o for o in options)
    [expander] = at.sidebar.expander
    assert "1 broken model file not offered" in expander.label
    [reason] = [c.value for c in expander.caption]
    assert "claims" in reason and "not a readable GGUF file" in reason
    assert at.sidebar.selectbox(key="model_choice").value.startswith("good.gguf")
    assert any(plain("good.gguf") in c.value and "2 layers" in c.value for c in at.sidebar.caption)


def test_a_model_running_without_its_float32_copy_says_why(monkeypatch):
    """A full disk (txviz.loading.fetch: the copy not kept) leaves a note beside the model; the sidebar shows it."""
    from dataclasses import replace

    import streamlit as st

    from app.services import models

    note = "Running from the GGUF in memory: the float32 copy that makes loads fast was not kept (the disk is full)."
    load = models.load_model
    monkeypatch.setattr(models, "load_model",
                        lambda source: replace(load(source), metadata={**load(source).metadata, "weights_note": note}))
    st.cache_resource.clear()  # a model loaded before, without the note, must not be reused
    at = app_on(str(SHIPPED_ZOO / "alibi"), sample_text(3)).run()
    no_errors(at)
    assert plain(note) in [caption.value for caption in at.sidebar.caption]  # as text: escaped Markdown
    st.cache_resource.clear()
