"""The logit lens (nostalgebraist 2020): at one position, the top next-token guesses after every layer."""

from __future__ import annotations

import streamlit as st

from app.figures.block_tables import lens_top_tokens
from txviz.analysis.block import logit_lens


def draw(loaded, resid, tokens: list[str]) -> None:
    """``resid``: (L+1, T, d), the stream after the embedding and each layer."""
    st.subheader("Logit lens")
    position = st.select_slider("Position", options=list(range(len(tokens))), value=len(tokens) - 1,
                                key="lens_position", format_func=lambda i: f"{i}: {tokens[i]}")
    probs, ids = logit_lens(loaded.model, resid[:, position], top=5)
    table = lens_top_tokens(probs, ids, loaded.tokenizer.decode, known=loaded.tokenizer.vocab_size)
    st.dataframe(table, hide_index=True, key="lens_table")
    st.caption("Row 0 reads the embedding itself; the last row is the model's real prediction for the next token.")
