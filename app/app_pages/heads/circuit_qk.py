"""The Circuit tab's query–key breakdown: why one head attends where it does. The head's pre-softmax
score of a key from a query splits exactly into (query-side node, key-side node) pairs, with the norms'
scales frozen at this run; shown as the top pairs, each side's node totals, a small matrix and the value
side. A button opens the head on the Attention page with the clean prompt."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import cache
from app.figures import circuit_charts
from app.services.prompts import PromptError
from app.ui import state
from app.ui.widgets import plain
from txviz.circuit.report import side_totals


def head_section(source: str, loaded, request, kept, key: str) -> None:
    st.subheader("Why a head looks where it looks: the query–key breakdown")
    st.markdown(
        "A head's pre-softmax score of key *j* from query *i* is a dot product of a query built from the residual "
        "stream at *i* and a key built from it at *j*. The residual stream is the sum of every earlier node's "
        "output, so with the norms' scales frozen at this run the score splits exactly into (query-side node, "
        "key-side node) pairs: which upstream heads built the query and the key that meet.")
    layer, head, query, key_token = _choose(loaded.config, request, kept, key)
    try:
        found = cache.circuit_qk(source, request, int(layer), int(head), int(query), int(key_token))
    except PromptError as error:
        st.warning(plain(str(error)))
        return
    if found is not None:
        _breakdown(found, kept.clean_tokens, layer, head, key_token, key)


def _choose(config, request, kept, key: str) -> tuple[int, int, int, int]:
    """The head, the query token and the key token; the button that opens the head on the Attention page."""
    tokens = kept.clean_tokens
    first_differs = next((i for i, (a, b) in enumerate(zip(kept.clean_tokens, kept.corrupt_tokens)) if a != b), 0)
    cols = st.columns(4)
    layer = cols[0].number_input("Layer", 0, config.n_layers - 1, value=config.n_layers - 1, key=f"circuit_layer_{key}")
    head = cols[1].number_input("Head", 0, config.n_heads - 1, value=0, key=f"circuit_head_{key}")
    label = lambda i: f"{i}: {tokens[i]!r}"  # noqa: E731  (a selectbox shows its options as text)
    query = cols[2].selectbox("Query token (attends)", range(len(tokens)), index=len(tokens) - 1, format_func=label,
                              key=f"circuit_query_{key}")
    keys = list(range(query + 1))
    key_token = cols[3].selectbox("Key token (attended)", keys, index=min(first_differs, query), format_func=label,
                                  key=f"circuit_key_{key}_{query}")
    if st.button(f"Open L{layer} H{head} in the Attention page (the clean prompt)", key=f"circuit_open_{key}",
                 icon=":material/grid_on:", on_click=_open_head, args=(request.clean, layer, head, query)):
        st.switch_page("app_pages/attention/page.py")
    return layer, head, query, key_token


def _breakdown(found, tokens: list[str], layer: int, head: int, key_token: int, key: str) -> None:
    a, b, c = st.columns(3)
    a.metric("Pre-softmax score (the model's)", f"{found.score:+.4f}")
    b.metric("Sum of the pairs", f"{found.sum:+.4f}")
    c.metric("Attention weight", f"{found.weight:.3f}")
    top = pd.DataFrame(found.top_pairs(15))
    sides = side_totals(found, 8)
    left, right = st.columns(2)
    left.dataframe(top, hide_index=True, key=f"circuit_pairs_{key}")
    left.dataframe(pd.DataFrame({"query-side node": [n["node"] for n in sides["query_side"]],
                                 "its total": [n["value"] for n in sides["query_side"]],
                                 "key-side node": [n["node"] for n in sides["key_side"]],
                                 "its total ": [n["value"] for n in sides["key_side"]]}),
                   hide_index=True, key=f"circuit_sides_{key}")
    right.plotly_chart(circuit_charts.qk_matrix(found.pairs.numpy(), found.query_nodes, found.key_nodes,
                                                title=f"L{layer} H{head}: query side × key side"),
                       key=f"circuit_qk_{key}")
    values = pd.DataFrame(found.top_values(8))
    st.markdown(plain(f"Value side: what L{layer} H{head} copies from token {key_token} ({tokens[key_token]!r}), each "
                      "node's part of the head's output at the query, along that output:"))
    st.dataframe(values, hide_index=True, key=f"circuit_values_{key}")


def _open_head(prompt: str, layer: int, head: int, query: int) -> None:
    """Before the next run draws any widget: the sidebar's prompt becomes the clean prompt, and the
    Attention page's head and query token the ones chosen here."""
    state.put("prompt", prompt)
    state.set_head(int(layer), int(head))
    state.put("query", int(query))
