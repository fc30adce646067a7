"""The block's steps at one layer, recomputed from the real residual stream, and the stream's size
through every layer."""

from __future__ import annotations

import streamlit as st

from app.figures import charts
from app.figures.block_tables import block_steps
from app.ui.widgets import bounded_slider
from txviz.analysis.block import block_walkthrough
from txviz.analysis.residual import largest_difference, stream_norms


def draw(loaded, resid, tokens: list[str]) -> None:
    """``resid``: (L+1, T, d), the stream after the embedding and each layer."""
    config = loaded.config
    layer = bounded_slider(st, "Layer", 0, config.n_layers - 1, key="layer")
    steps, output = block_walkthrough(loaded.model, resid[layer], layer)
    st.dataframe(block_steps(steps), hide_index=True, key="block_steps")
    st.caption(f"Recomputing the block from its input reproduces the model's own output to "
               f"{largest_difference(resid[layer + 1], output):.1e}. "
               f"T = {len(tokens)} tokens, d_model = {config.d_model}, {config.n_heads} heads × d_k {config.head_dim}, "
               f"FFN hidden {config.ffn_hidden}. Every shape keeps T × d_model: the block is a residual update.")

    st.subheader("The residual stream grows through the layers")
    st.plotly_chart(charts.residual_norms(stream_norms(resid), tokens), key="resid_norms")
