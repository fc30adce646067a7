"""The Circuit tab's run: how long it takes, said before it starts; the button that starts it; a
progress bar per batched call with its own Stop, and what a stopped run got through. Nothing of a
stopped run is kept."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.services.prompts import PromptError, about
from app.ui import state
from app.ui.widgets import plain

RUN = state.StoppableRun("circuit")


def run(source: str, request):
    """The estimate and the button; a run under a progress bar with its own Stop, or None."""
    stopped = RUN.stopped()
    if stopped is not None:
        st.info(f"Stopped after {stopped['seconds']:.0f} s, at {stopped['message']} ({stopped['fraction']:.0%} of "
                "the work). Nothing of it was kept. Start it again to measure.")
    try:
        estimate = cache.circuit_estimate(source, request)
    except PromptError as error:
        st.warning(plain(about(error, "The clean prompt")))
        return None
    st.caption(f"It takes {estimate.describe()}.")
    if not st.button("Find the circuit", key="circuit_run", type="primary"):
        return None
    try:
        with RUN.running("Scoring every edge, then measuring circuits", estimate.seconds) as progress:
            return cache.get_circuit(source, request,
                                     lambda done, total: progress(done / max(total, 1), f"batch {done} of at most {total}"))
    except (PromptError, ValueError) as error:
        st.warning(plain(about(error, "The clean prompt")))
        return None
