"""The head view: one query token's attention to the keys it reads, as lines."""

from __future__ import annotations

import streamlit as st

from app.components.head_view import head_view as head_view_lines
from app.figures import charts
from app.ui import state
from app.ui.widgets import plain
from txviz.analysis.heads.metrics import hide_sink


def query_index(n: int) -> int:
    """The head view's query token; the URL's "query" is -1 for the last token, whatever the length."""
    query = int(state.get("query"))
    return n - 1 if not 0 <= query < n else query


def _pick_query(n: int) -> None:
    picked = int(state.get("query_token", None))
    state.put("query", -1 if picked == n - 1 else picked)


def head_view(view, layer: int, head: int, hide: bool) -> None:
    st.subheader(f"Head view: layer {layer}, head {head}")
    n, tokens = view.n, view.tokens
    state.put("query_token", query_index(n))  # the slider shows the shared query (from a link too)
    query = st.select_slider("Query token", options=list(range(n)), key="query_token", on_change=_pick_query,
                             args=(n,), format_func=lambda i: f"{i}: {tokens[i]}")
    query_row = view.traced.trace.attn(layer, head, rows=slice(query, query + 1))
    query_row = (hide_sink(query_row) if hide else query_row)[0]
    head_view_lines(charts.head_view(query_row.numpy(), tokens, query), key="head_view")
    st.caption(f"Lines from {plain(repr(tokens[query]))} to the keys it reads, thicker = more weight (top 24).")
