"""Session-state rules of the KV page's widgets: a choice that follows the model, and every tab's
settings kept while another tab is open."""

from __future__ import annotations

import streamlit as st


def follow(key: str, identity: str, default) -> None:
    """A widget whose options or default come from another input (the model) starts again from
    ``default`` when that input changes, so no choice outlives the input it was made for; call before
    drawing it, and draw it without a default."""
    owner = f"_{key}_follows"
    if st.session_state.get(owner) != identity or st.session_state.get(key) is None:
        st.session_state[key] = default
        st.session_state[owner] = identity


def follow_if(key: str, identity: str, default, offered, own: bool) -> None:
    """``follow`` for a choice among ``offered``: a model with a choice of its ``own`` starts at ``default``
    whenever the model changes; another keeps what was chosen while it is still offered."""
    if own or st.session_state.get(key) not in offered:
        follow(key, identity, default)


def keep_alive(defaults: dict) -> None:
    """Fill the page's settings once and keep them while another tab is open (Streamlit forgets the value
    of a widget that a run does not draw). Draw these widgets without a default: the value is here."""
    for key, default in defaults.items():
        st.session_state[key] = st.session_state.get(key, default)


def within(key: str, low: int, high: int) -> None:
    """Bring a kept slider value inside the range this run draws it with (the limits or the model may
    have narrowed it since it was set); call before drawing it."""
    st.session_state[key] = min(max(st.session_state[key], low), high)
