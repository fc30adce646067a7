"""Which layers see the whole prefix and which only a sliding window (Gemma 3: five local layers of 512
tokens, then one global; Mistral: every layer), said on the Attention page only for a model that has them."""

from __future__ import annotations

import streamlit as st

from app.ui.widgets import counted


def _ranges(layers: list[int]) -> str:
    """[0, 1, 2, 4] → "0–2, 4"."""
    runs, start = [], None
    for i, layer in enumerate(layers):
        start = layer if start is None else start
        if i + 1 == len(layers) or layers[i + 1] != layer + 1:
            runs.append(f"{start}" if start == layer else f"{start}–{layer}")
            start = None
    return ", ".join(runs)


def _layers_are(layers: list[int]) -> str:
    """"layer 3 is" for one layer, "layers 0–4, 6 are" for more."""
    return f"layer {layers[0]} is" if len(layers) == 1 else f"layers {_ranges(layers)} are"


def window_text(config, n_tokens: int) -> str | None:
    """The note on the layers' kinds, or None for a model whose every layer sees the whole prefix."""
    windows = config.layer_windows
    local = [i for i, window in enumerate(windows) if window is not None]
    if not local:
        return None
    width = min(windows[i] for i in local)
    global_ = [i for i, window in enumerate(windows) if window is None]
    seen = (f"Your prompt has {counted(n_tokens, 'token')}, so the band shows in the local layers' maps."
            if n_tokens > width else
            f"Your prompt has {counted(n_tokens, 'token')}, within the window: every layer's map looks alike "
            f"here; a prompt over {counted(width, 'token')} shows the band.")
    who = (f"{_layers_are(global_).capitalize()} **global** (every earlier token); {_layers_are(local)} **local**"
           if global_ else "Every layer is **local**")
    last = "the last token" if width == 1 else f"the last {width:,} tokens"
    return (f"{who}: a token sees only {last}, so the mask is also −∞ where i − j ≥ {width} "
            f"and the map is a band along the diagonal. {seen}")


def window_note(config, n_tokens: int) -> None:
    text = window_text(config, n_tokens)
    if text is not None:
        st.info(text)
