"""The Heads page's Coreference tab on a checkpoint whose context is shorter than the built-in set's longest
sentence (a tiny Qwen3 of 64 positions, with a byte-level tokenizer): the time estimate of scoring the set
is drawn, not an error from timing a forward longer than the model can run."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import aim_at, app_on, no_errors, page_path
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf_dense import save_with_tokenizer
from txviz.loading.hf.loader import load_hf_dir

pytestmark = NEEDS_TRANSFORMERS


def test_the_builtin_set_estimate_on_a_model_with_a_short_context(tmp_path, monkeypatch):
    import streamlit as st

    from app import cache
    from app.services import heads

    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    directory = save_with_tokenizer("qwen3", tmp_path)[2]
    loaded = load_hf_dir(directory, device="cpu")
    assert heads.coref_longest(loaded, "sink") > loaded.config.max_seq_len  # the set outgrows the context
    st.cache_resource.clear()
    cache._shared.clear()
    try:
        at = app_on(model=directory)
        at.query_params["coref_text"] = "Mary met John, and she smiled."  # opens on the Coreference tab
        at.run()
        at.switch_page(page_path("heads")).run(timeout=300)
        no_errors(at)
        assert any("here now" in caption.value for caption in at.caption)
    finally:
        st.cache_resource.clear()
        cache._shared.clear()


def test_a_sentence_past_the_context_is_named_as_the_sentence_not_the_prompt(tmp_path, monkeypatch):
    # the sidebar's prompt fits (16 tokens); the sentence with its completion does not (83 on 64 positions):
    # the warning said "The prompt has 83 tokens", which reads as the sidebar's
    import streamlit as st

    from app import cache

    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    directory = save_with_tokenizer("qwen3", tmp_path)[2]
    loaded = load_hf_dir(directory, device="cpu")
    sentence = "Mary met John at the station, and she gave him a book."
    st.cache_resource.clear()
    cache._shared.clear()
    try:
        at = aim_at(app_on(model=directory, prompt="Hi cat, hi cat."), "heads")
        at.query_params["coref_text"] = sentence
        at.session_state["heads_tab"] = "Coreference"  # as a click on the tab opens it
        at.run(timeout=300)
        no_errors(at)
        completion = next(t for t in at.text_input if t.label.startswith("Completion"))
        n_tokens = len(loaded.tokenizer.encode(sentence + completion.value.rstrip(), bos="sink").ids)
        assert n_tokens > loaded.config.max_seq_len
        warnings = " ".join(w.value for w in at.warning)
        assert f"The sentence with its completion has {n_tokens} tokens" in warnings, warnings
        assert "The prompt has" not in warnings
    finally:
        st.cache_resource.clear()
        cache._shared.clear()
