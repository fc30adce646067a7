"""One block, end to end: shapes through a real decoder block, the residual stream's
size across layers, and what the model would predict if it stopped after each layer."""

from __future__ import annotations

import streamlit as st

from app.app_pages.block import lens, walkthrough
from app.services.traces import display_tokens
from app.ui import sidebar
from txviz.analysis.block import block_equation

st.title("One block, end to end")
st.markdown(
    "A decoder block reads the **residual stream** x, normalizes it, lets attention mix information "
    "across positions, adds the result back, normalizes again, and runs a per-token feed-forward network "
    "whose output is added back too. Attention is the only place tokens talk to each other; the FFN "
    "transforms each token on its own. Stacking L such blocks and reading the last stream through the "
    "unembedding gives the next-token logits.")

source, loaded, traced = sidebar.prompt_trace(capture=("resid",))
st.latex(block_equation(loaded.config), help="This model's own norm and feed-forward network, read from its config.")
tokens = display_tokens(loaded, traced)  # labels: split characters shown whole
resid = traced.trace["resid"][:, 0]  # (L+1, T, d)

walkthrough.draw(loaded, resid, tokens)
lens.draw(loaded, resid, tokens)
