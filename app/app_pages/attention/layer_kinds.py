"""Which layers see the whole prefix and which only a sliding window (Gemma 3: five local layers of 512
tokens, then one global; Mistral: every layer), said on the Attention page only for a model that has them."""

from __future__ import annotations

import streamlit as st


def _ranges(layers: list[int]) -> str:
    """[0, 1, 2, 4] → "0–2, 4"."""
    runs, start = [], None
    for i, layer in enumerate(layers):
        start = layer if start is None else start
        if i + 1 == len(layers) or layers[i + 1] != layer + 1:
            runs.append(f"{start}" if start == layer else f"{start}–{layer}")
            start = None
    return ", ".join(runs)


def window_note(config, n_tokens: int) -> None:
    windows = config.layer_windows
    local = [i for i, window in enumerate(windows) if window is not None]
    if not local:
        return
    width = min(windows[i] for i in local)
    global_ = [i for i, window in enumerate(windows) if window is None]
    seen = (f"Your prompt has {n_tokens} tokens, so the band shows in the local layers' maps." if n_tokens > width
            else f"Your prompt has {n_tokens} tokens, within the window: every layer's map looks alike "
                 f"here; a prompt over {width} tokens shows the band.")
    who = (f"Layers {_ranges(global_)} are **global** (every earlier token); layers {_ranges(local)} are **local**"
           if global_ else "Every layer is **local**")
    st.info(f"{who}: a token sees only the last {width} tokens, so the mask is also −∞ where i − j ≥ {width} "
            f"and the map is a band along the diagonal. {seen}")
