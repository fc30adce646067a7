"""Session-state rules of the KV page's widgets: a choice that follows the model, and calculator
settings kept while another tab is open."""

from __future__ import annotations

import streamlit as st


def follow(key: str, identity: str, default) -> None:
    """A widget whose options or default come from another input (the model) starts again from
    ``default`` when that input changes (STYLE 11); call before drawing it, and draw it without a default."""
    owner = f"_{key}_follows"
    if st.session_state.get(owner) != identity or st.session_state.get(key) is None:
        st.session_state[key] = default
        st.session_state[owner] = identity


def keep_alive(defaults: dict) -> None:
    """Fill the calculator's settings once and keep them while another tab is open (Streamlit forgets
    the value of a widget that a run does not draw)."""
    for key, default in defaults.items():
        st.session_state[key] = st.session_state.get(key, default)
