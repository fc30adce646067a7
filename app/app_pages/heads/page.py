"""Heads page: detectors for known head types, and the heads that resolve pronouns."""

from __future__ import annotations

from functools import partial

import streamlit as st

from app.app_pages.heads import circuit, coreference, detectors, widget_memory
from app.ui import sidebar, state

COREF_LINK = ("coref_text", "coref_marks", "coref_answer", "coref_completion")  # what a link to the tab carries

st.title("Heads & coreference")
st.markdown(
    "Heads specialize. Some always look one token back, some look at earlier copies of the current token, "
    "some complete patterns (**induction**: after *A B … A*, attend to *B*), many park their attention on "
    "the first token when they have nothing to do. A detector scores each head by the attention mass it "
    "puts on a pattern P, averaged over the rows where P is defined.")
st.latex(r"\mathrm{score}(\text{head}) = \frac{1}{|R|}\sum_{i \in R}\ \sum_{j:\,P_{ij}=1} A_{ij}")

source, loaded, traced = sidebar.prompt_trace()
bos = state.get("bos")

widget_memory.keep_widgets_alive(state.get("coref_text"))
if not state.has("heads_tab") and any(state.get(key) != state.DEFAULTS[key] for key in COREF_LINK):
    state.put("heads_tab", "Coreference")  # a link that carries a sentence or marks opens on them
st.caption("Only the open tab is computed.")
state.lazy_tabs("heads_tab", {"Detectors": partial(detectors.detectors_tab, source, loaded, traced),
                              "Coreference": partial(coreference.coref_and_set, source, loaded, bos),
                              "Circuit": partial(circuit.circuit_tab, source, loaded, bos)})
