"""The KV page's Cache growth tab on a checkpoint whose embedding has more rows than its tokenizer has
tokens (as Qwen3's, OLMo 2's and gpt-oss's do): a generated id past the tokenizer's vocabulary is written
by number, not a crash of the tab. A tiny random gpt-oss of 256 rows beside the zoo's 226-word tokenizer."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import tiny_gpt_oss
from tests.helpers.apptest import click_tab, no_errors, open_at
from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import save
from app.ui.widgets import plain
from txviz.loading.zoo import SHIPPED_ZOO

TOKENIZER = SHIPPED_ZOO / "alibi" / "tokenizer.json"
PROMPT = "the dog ran after the kite in the park"

pytestmark = [*NEEDS_TRANSFORMERS,
              pytest.mark.skipif(not TOKENIZER.is_file(), reason="the zoo's tokenizer is not shipped")]


def test_generated_ids_past_the_tokenizer_are_written_by_number(tmp_path, monkeypatch):
    import streamlit as st

    from app import cache

    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(tmp_path))
    directory = save(tiny_gpt_oss.build(vocab_size=256), tmp_path / "gpt_oss")
    shutil.copy(TOKENIZER, directory / "tokenizer.json")
    st.cache_resource.clear()
    try:
        at = open_at("kv_cache", str(directory), PROMPT, timeout=300)
        at = click_tab(at, "kv_tab", "Cache growth")
        no_errors(at)
        loaded = cache.get_model(str(directory))
        generated = cache.get_generation(str(directory), PROMPT, at.session_state["bos"],
                                         int(at.session_state["kv_new_tokens"]), True, False, shared=True).new_ids
        past = [int(i) for i in generated if i >= loaded.tokenizer.vocab_size]
        assert past  # this seed's model chooses padded rows
        said = " ".join(m.value for m in at.markdown if m.value.startswith("**Generated:**"))
        assert all(plain(f"<id {i}: no token>") in said for i in past)  # as the page escapes it
    finally:
        st.cache_resource.clear()
