"""The few session-state keys the app shares between pages, mirrored in the URL query params so a
view can be shared by link: prompt, model, bos policy, layer, head, the coreference sentence."""

from __future__ import annotations

import streamlit as st

DEFAULT_PROMPT = "The trophy didn't fit in the suitcase because it was too big."
DEFAULT_COREF = "Mary met John at the station, and she gave him a book."  # the Heads page's coreference sentence
DEFAULTS = {"prompt": DEFAULT_PROMPT, "model": "default", "bos": "sink", "layer": 0, "head": 0,
            "coref_text": DEFAULT_COREF}
BOS_POLICIES = {"sink": "prepend <|endoftext|> as an attention sink", "none": "no extra token",
                "bos": "prepend the model's BOS token"}
URL_KEYS = tuple(DEFAULTS)


def init() -> None:
    """Fill session state from the URL on the first run of a session, else from the defaults."""
    if st.session_state.get("_initialized"):
        for key in URL_KEYS:  # keep widget-bound keys alive on pages that do not draw their widget
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]
        return
    params = st.query_params
    for key, default in DEFAULTS.items():
        raw = params.get(key)
        value = default
        if raw is not None:
            try:
                value = type(default)(raw)
            except ValueError:
                value = default
        st.session_state[key] = value
    if st.session_state["bos"] not in BOS_POLICIES:
        st.session_state["bos"] = DEFAULTS["bos"]
    if not st.session_state["model"].strip():
        st.session_state["model"] = DEFAULTS["model"]
    st.session_state["_initialized"] = True


def sync_url() -> None:
    """Write the shared keys back into the URL (only those that differ from the defaults)."""
    for key in URL_KEYS:
        value = st.session_state.get(key, DEFAULTS[key])
        if value == DEFAULTS[key]:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != str(value):
            st.query_params[key] = str(value)


def get(key: str):
    return st.session_state.get(key, DEFAULTS[key])


def clamp_head(n_layers: int, n_heads: int) -> None:
    """Keep the shared layer and head inside the loaded model (a URL may say layer=-5 or head=99).
    Call before the layer/head widgets are drawn."""
    for key, count in (("layer", n_layers), ("head", n_heads)):
        st.session_state[key] = min(max(int(get(key)), 0), count - 1)


def set_head(layer: int, head: int) -> None:
    """Select a head from a click elsewhere (before the layer/head widgets are drawn)."""
    st.session_state["layer"], st.session_state["head"] = int(layer), int(head)
    sync_url()  # the app synced the URL before this page ran: keep the link to the view current
