"""Heads page (seed §1.1, §1.4): detectors for known head types, and the heads that resolve pronouns."""

from __future__ import annotations

import streamlit as st
import torch

from app import charts, resources, sidebar, state
from txviz.analysis.detectors import offset_pattern, pattern_scores, token_pattern

st.title("Heads & coreference")
st.markdown(
    "Heads specialize. Some always look one token back, some look at earlier copies of the current token, "
    "some complete patterns (**induction**: after *A B … A*, attend to *B*), many park their attention on "
    "the first token when they have nothing to do. A detector scores each head by the attention mass it "
    "puts on a pattern P, averaged over the rows where P is defined.")
st.latex(r"\mathrm{score}(\text{head}) = \frac{1}{|R|}\sum_{i \in R}\ \sum_{j:\,P_{ij}=1} A_{ij}")

source, loaded = sidebar.current()
config = loaded.config
prompt, bos = state.get("prompt"), state.get("bos")
try:
    traced = resources.get_trace(source, prompt, bos)
except resources.PromptError as error:
    st.warning(str(error))
    st.stop()
tokens = list(traced.tokens)
table = resources.get_head_table(source, prompt, bos)

tab_detect, tab_coref = st.tabs(["Detectors", "Coreference"])
with tab_detect:
    a, b = st.columns(2)
    a.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "prev_token"),
                                         title="Previous-token (on your prompt)", zmax=1), key="det_prev")
    b.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "duplicate_token"),
                                         title="Duplicate-token (on your prompt)", zmax=1), key="det_dup")
    a.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "first_token_mass"),
                                         title="First-token sink (on your prompt)", zmax=1), key="det_sink")
    length = b.number_input("Induction test: random tokens repeated twice, length", 10, 200, 50, key="ind_len")
    induction = resources.get_induction_scores(source, int(length), 0)
    b.plotly_chart(charts.metric_heatmap(induction, title=f"Induction (random {length}-token sequence, repeated)",
                                         zmax=1), key="det_ind")
    best = divmod(int(induction.argmax()), induction.shape[1])
    b.caption(f"Strongest induction head: layer {best[0]}, head {best[1]} ({induction.max():.2f}).")

    st.subheader("Your own pattern")
    kind = st.radio("Pattern", ["k tokens back", "a token's text"], horizontal=True, key="pattern_kind")
    if kind == "k tokens back":
        offset = st.number_input("k", 0, max(0, len(tokens) - 1), 2, key="pattern_offset")
        pattern = offset_pattern(len(tokens), int(offset))
        label = f"{offset} tokens back"
    else:
        word = st.text_input("Token text (as shown in the token strip, without spaces)", value=".", key="pattern_text")
        pattern = token_pattern(tokens, word)
        label = f"tokens reading {word!r}"
    if not pattern.any():
        st.info("This pattern matches nothing in the prompt.")
    else:
        scores = pattern_scores(traced.trace["attn_probs"][:, 0], pattern).numpy()
        st.plotly_chart(charts.metric_heatmap(scores, title=f"Mass on {label}", zmax=1), key="det_custom")

with tab_coref:
    st.info("Coreference ranking lands with the coreference analysis (see the issue note).")
