"""Memory stays within the shared store's budget however many sessions there are: a session keeps no
trace of its own. Streamlit keeps a session (its fragments' saved arguments, its session state) long after
the visitor has left, so a trace held there would outlive the byte-bounded store in app/cache.py: every
visitor's trace stayed. Here many AppTest sessions stay open (each keeps its fragments, as a stored
session does) while the store keeps one trace; the traces alive afterwards are only the store's.

The view the fragments keep fetches its trace again when the store has dropped it
(app/app_pages/attention/view.py), so a fragment rerun after that still draws."""

from __future__ import annotations

import gc
import weakref

import pytest

from tests.helpers.apptest import app_on, no_errors

N_SESSIONS = 5


def _live_traces() -> list:
    from app.services.traces import PromptTrace

    gc.collect()
    return [obj for obj in gc.get_objects() if type(obj) is PromptTrace]


@pytest.fixture
def one_trace_store(monkeypatch):
    """The shared trace store keeps only its newest trace (a budget of one byte; the newest always stays)."""
    import streamlit as st

    monkeypatch.setenv("TXVIZ_TRACE_CACHE_BYTES", "1")
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()


def test_sessions_that_stay_keep_no_trace_beyond_the_shared_store(one_trace_store):
    from app.cache import _shared
    from txviz.loading.zoo import SHIPPED_ZOO

    sessions = []
    for i in range(N_SESSIONS):  # each visitor with a prompt of their own, and so a trace of their own
        at = app_on(str(SHIPPED_ZOO / "base"), f"Mary had a red kite and {i} small dogs.", timeout=300)
        at.run()
        no_errors(at)
        sessions.append(at)
    store = _shared("traces")
    kept = {id(value) for value, _ in store._values.values()}
    live = _live_traces()
    assert len(store) == 1
    assert live and {id(traced) for traced in live} <= kept, (
        f"{len(live)} traces alive with {N_SESSIONS} sessions open; the shared store holds {len(store)}")
    # the first session turns Hide sink on: its page runs again on a trace the store had dropped
    sessions[0].toggle(key="hide_sink").set_value(True).run()
    no_errors(sessions[0])


def test_the_view_fetches_its_trace_again_once_the_store_dropped_it(monkeypatch):
    from app.app_pages.attention import view as view_module
    from app.app_pages.attention.view import AttentionView

    class Traced:  # a stand-in PromptTrace: what the view reads of one
        n_tokens = 3

        class trace:
            layers = (0, 1)

    first, again = Traced(), Traced()
    fetched = []

    def get_attention_trace(source, prompt, bos):
        fetched.append((source, prompt, bos))
        return again, None

    monkeypatch.setattr(view_module.cache, "get_attention_trace", get_attention_trace)
    view = AttentionView.of("default", "a prompt", "sink", None, first, None, ["a", "b", "c"], None)
    assert view.traced is first and not fetched  # alive in the store: no fetch
    assert (view.n, view.n_layers) == (3, 2)
    held = weakref.ref(first)
    del first
    gc.collect()
    assert held() is None  # the view did not keep it alive
    assert view.traced is again and fetched == [("default", "a prompt", "sink")]
    assert view.traced is again and len(fetched) == 1  # fetched once, then held weakly again


def test_the_download_of_a_dropped_trace_is_the_prompts_own(one_trace_store):
    """The download button's function outlives the run that drew it; once the store has dropped its trace
    it writes the JSON of that same prompt (fetched again), not of whatever the store holds now."""
    import json

    from app import cache
    from app.app_pages.attention.head_explorer import _trace_json
    from app.app_pages.attention.view import AttentionView
    from txviz.loading.zoo import SHIPPED_ZOO

    source, first, other = str(SHIPPED_ZOO / "base"), "Mary had a red kite.", "Tom saw a big dog."
    traced, plan = cache.get_attention_trace(source, first, "sink")
    table = cache.get_head_table(source, first, "sink")
    expected = traced.trace.attn(1, 2).numpy().copy()
    view = AttentionView.of(source, first, "sink", cache.get_model(source), traced, plan, list(traced.tokens), table)
    held = weakref.ref(traced)
    del traced
    cache.get_attention_trace(source, other, "sink")  # the store (one trace) now holds the other prompt's
    gc.collect()
    assert held() is None
    document = json.loads(_trace_json(view, 1, 2, with_map=True))
    assert document["prompt"] == first and "".join(t["text"] for t in document["tokens"]).endswith("kite.")
    (drawn,) = document["attention"]
    assert (drawn["layer"], drawn["head"]) == (1, 2)
    assert drawn["weights"] == [[round(float(w), 6) for w in row] for row in expected.tolist()]
