"""A model home whose default model is a tiny stand-in with SmolLM2's ChatML template (the zoo's models
have none), for the pages' tests of what a chat template changes."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.loading import fetch
from txviz.loading.sources import KNOWN_MODELS


@pytest.fixture
def home_with_template(tmp_path, monkeypatch):
    """TXVIZ_HOME on a fresh folder holding the stand-in under SmolLM2's cache file name; nothing fetched."""
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    monkeypatch.setattr(fetch, "download_wheel", lambda *a, **k: pytest.fail("a cached model was fetched again"))
    config = tiny(name="tiny-smollm2")
    write_gguf(tmp_path / KNOWN_MODELS["smollm2-135m"].filename, config, weights_of(config))
    import streamlit as st
    st.cache_resource.clear()
    yield tmp_path
    st.cache_resource.clear()
    shutil.rmtree(tmp_path, ignore_errors=True)
