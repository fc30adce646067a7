"""Widgets whose ranges come from the model or the limits, so they hold for any model and setting."""

from __future__ import annotations

import streamlit as st


def bounded_slider(container, label: str, low: int, high: int, value: int | None = None, *, key: str,
                   **kwargs) -> int:
    """``container.slider`` over [low, high], or a caption when the range holds one value (Streamlit
    refuses min == max: a one-layer model, a limit of one new token)."""
    if high <= low:
        st.session_state[key] = low
        container.caption(f"{label}: {low}")
        return low
    if value is not None:
        value = min(max(value, low), high)
        return container.slider(label, low, high, value, key=key, **kwargs)
    return container.slider(label, low, high, key=key, **kwargs)
