"""Every page of the app on the real Gemma 3 270M, chosen by name as a link would: each page
draws with no exception or error on a short prompt, the sidebar says what the model is, and the tabs
whose story changes for Gemma (RoPE per layer kind; both real caches side by side; the two real models
beside the zoo) draw too. The session fetches Gemma 3 once (conftest's ``gemma3_gguf_path``) beside the
default model (``default_gguf_path``), in the session's fresh home."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import PAGE_NAMES, app_on, has_chart, no_errors, page_path

PROMPT = "The cat sat on the mat because it was tired."
GEMMA_TABS = {"positions": ("positions_tab_rope_kinds", "RoPE per layer kind", "rope_kind_waves"),
              "kv_cache": ("kv_tab", "Real models side by side", "kv_real_total")}


@pytest.fixture
def gemma_app(default_gguf_path, gemma3_gguf_path):
    import streamlit as st

    from filelock import FileLock

    from txviz.loading.home import txviz_home

    st.cache_resource.clear()  # the model of this session's home, not another test's
    # the app loads through the float32 copy: the first of this test and tests/loading/test_gemma3_real.py
    # to load Gemma writes it, the other waits here and reads it instead of dequantizing again (~15 s)
    with FileLock(str(txviz_home() / ".test-gemma3-load.lock")):
        at = app_on("gemma3-270m", PROMPT, timeout=600).run()
    no_errors(at)
    yield at
    st.cache_resource.clear()


def test_gemma3_is_loaded_by_name_and_every_page_draws(gemma_app):
    """One test, so that one worker loads Gemma (~25-40 s under load): a test per page spread the pages
    over both workers, and each loaded it (an xdist_group mark does not pin a module of the e2e tier:
    tests/conftest.py)."""
    at = gemma_app
    caption = "\n".join(c.value for c in at.sidebar.caption)
    assert "18 layers · 4 heads · 1 KV head (MQA)" in caption
    for name in PAGE_NAMES:
        at.switch_page(page_path(name)).run()
        assert not at.exception and not at.error, (name, [e.value for e in (*at.exception, *at.error)])
        assert 0 <= at.session_state["layer"] < 18 and 0 <= at.session_state["head"] < 4, name
        if name in GEMMA_TABS:
            key, label, chart = GEMMA_TABS[name]
            at.session_state[key] = label
            at.run()
            assert not at.exception and not at.error, (name, [e.value for e in (*at.exception, *at.error)])
            assert has_chart(at, chart), name
