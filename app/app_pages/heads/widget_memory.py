"""Keeping the Heads page's widget values while their tab is closed, and forgetting stale marks."""

from __future__ import annotations

from app.ui import state
from txviz.analysis.coref.marks import sort_keys

DETECTOR_WIDGETS = ("ind_len", "pattern_")  # key prefixes of the Detectors tab's widgets


def keep_widgets_alive(text: str) -> None:
    """A closed tab's widgets are not drawn, and Streamlit would forget their values: keep them, so that
    reopening the tab shows them again. The marks of an earlier sentence are dropped."""
    keep, forget = sort_keys(state.keys(), text, kept_prefixes=DETECTOR_WIDGETS)
    state.keep({key: state.get(key) for key in keep})
    state.forget(forget)
