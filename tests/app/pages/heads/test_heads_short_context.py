"""The Heads page's Coreference tab on a checkpoint whose context is shorter than the built-in set's longest
sentence (a tiny Qwen3 of 64 positions, with a byte-level tokenizer): the time estimate of scoring the set
is drawn, not an error from timing a forward longer than the model can run."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import app_on, no_errors, page_path
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
