"""The "Permutation" tab: layer 0's scores of the prompt and of a shuffle of it, as sorted
sets, with the model's positions and with them removed: without positions they are the same numbers."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.positions.view import PositionsView
from app.ui.widgets import plain
from txviz.analysis.positions import measured as pos

WHAT_THE_SCHEME_DOES = {
    "rope": "RoPE rotates q and k before the product, so with the model's positions the set changes.",
    "alibi": "ALiBi adds its bias after this product, so both rows are the same set: order reaches this model "
             "only through the bias (first tab).",
    "learned": "The table is added to the embeddings before layer 0, so with the model's positions the set changes.",
    "none": "This model has none to remove: both rows are the same set, and only the causal mask tells order.",
}


def permutation_tab(view: PositionsView) -> None:
    st.markdown("Shuffle the prompt and compare layer 0's scores q_i·k_j/√d over all pairs and heads, as sorted "
                "lists. Without positions they are the same numbers in another order. "
                + WHAT_THE_SCHEME_DOES[view.config.positions])
    checks = cache.get_permutation_check(view.source, view.prompt, view.bos)
    st.dataframe(pos.permutation_rows(checks), hide_index=True)
    order = next(iter(checks.values()))[2].tolist()
    st.caption("Shuffled order: " + plain(" ".join(view.tokens[i] for i in order)))
