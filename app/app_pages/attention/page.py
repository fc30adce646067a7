"""Attention page: every head of the loaded model on your prompt."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.attention.head_explorer import head_explorer
from app.app_pages.attention.head_table import head_table
from app.app_pages.attention.layer_kinds import window_note
from app.app_pages.attention.layer_profile import layer_profile
from app.app_pages.attention.sink_note import sink_note
from app.app_pages.attention.token_strip import capture_plan_note, shown_tokens, token_strip
from app.app_pages.attention.view import AttentionView
from app.services.prompts import PromptError
from app.ui import sidebar, state
from app.ui.widgets import missing_bos_warning, plain
from txviz.analysis.heads.metrics import METRICS

st.title("Attention")
st.markdown(
    "Every token asks a question (its **query** q), every token advertises what it holds (its **key** k), "
    "and the answer is a blend of the tokens' **values** v, weighted by how well query and key match. "
    "A causal decoder may only look back, so the weights above the diagonal are forced to zero. "
    "Each head does this with its own projections, so each can look for something different.")
st.latex(r"\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\!\Big(\frac{QK^\top}{\sqrt{d_k}}+M\Big)V,\qquad "
         r"M_{ij}=\begin{cases}0 & j\le i\\ -\infty & j>i\end{cases}")

source, loaded = sidebar.current()
prompt, bos = state.get("prompt"), state.get("bos")
try:
    traced, plan = cache.get_attention_trace(source, prompt, bos)
except PromptError as error:
    st.warning(plain(error))
    st.stop()
if len(traced.trace.layers) < loaded.config.n_layers:  # a budget too small for every layer keeps the leading ones
    state.clamp_head(len(traced.trace.layers), loaded.config.n_heads)
shown = shown_tokens(loaded, traced)
token_strip(shown, traced, loaded.config, bos)
missing_bos_warning(loaded.tokenizer, bos)  # the Heads page's coreference set warns the same
if plan is not None:
    capture_plan_note(loaded, traced.n_tokens, plan)
window_note(loaded.config, traced.n_tokens)
sink_note(loaded.config, traced)

table = cache.get_head_table(source, prompt, bos).astype({m: float for m in METRICS})  # undefined: NaN, not None
view = AttentionView.of(source, prompt, bos, loaded, traced, plan, [t.text for t in shown], table)
state.follow("query", (source, prompt, bos))  # a token index means nothing in another prompt
head_explorer(view)
layer_profile(table)
head_table(table)
