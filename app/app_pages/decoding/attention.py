"""The new token's attention at the chosen step: the query of the token before it over every earlier
token (the last row of the causal map, one longer each step), for one layer and head, and every head
of that layer. A sliding-window layer shades the keys beyond its window. The layer and head are the
app's shared ones (kept in the URL); the rows were recorded during the run, so choosing reruns nothing
but the step's fragment (step_view), which draws these two beside the sampler in one figure."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.figures import decoding_charts
from app.ui.widgets import plain


def choose(view) -> tuple[int, int]:
    """The layer and head selectboxes; the ones chosen."""
    config = view.config
    c1, c2 = st.columns(2)
    layer = c1.selectbox("Layer", list(range(config.n_layers)), key="layer")
    head = c2.selectbox("Head", list(range(config.n_heads)), key="head")
    return int(layer), int(head)


def figures(view, step, layer: int, head: int) -> tuple[tuple, tuple]:
    """The chosen head's row and every head's rows of ``layer`` at ``step``, as (data, layout) parts."""
    rows = step.attention[layer].float().numpy()  # (H, position): every head's weights over the keys
    tokens = view.texts[:step.position]  # the keys: every token before the new one, the query's own last
    window = view.config.layer_windows[layer]
    kind = "full attention" if window is None else f"sliding window of {window}"
    row = decoding_charts.attention_row.parts(rows[head], tokens, window=window,
                                              title=f"Layer {layer}, head {head} ({kind}): the query at "
                                                    f"position {step.query_position} over {step.position} keys")
    return row, decoding_charts.heads_overview.parts(rows, tokens, head=head, title=f"Every head of layer {layer}")


def caption(view, step, layer: int, head: int) -> None:
    rows = step.attention[layer].float().numpy()
    tokens = view.texts[:step.position]
    strongest = int(np.argmax(rows[head]))
    st.caption(f"Head {head} looks most at position {strongest} ({plain(repr(tokens[strongest]))}, weight "
               f"{rows[head, strongest]:.2f}); its row sums to {rows[head].sum():.4f}.")
