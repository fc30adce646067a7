"""The Attention page's note on a model whose heads learn a sink (gpt-oss): what the maps show, and how much
attention the sinks take on this prompt, overall, at its extremes and at the page's head."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.services.sinks import sink_shares
from app.ui import state


def sink_text(shares: np.ndarray | None, layers: tuple[int, ...]) -> str:
    """The note for a sink model: ``shares`` (L, H) as sink_shares gives them for the traced ``layers``."""
    intro = ("Every head of this model learns an **attention sink**: one more logit in its softmax that no "
             "token holds, so a head can attend to nothing. The maps show the weights on the prompt's tokens: "
             "each row sums to 1 − the sink's share.")
    if shares is None:
        return intro + " The shares are measured on prompts whose maps are stored whole."
    low, high = np.unravel_index(shares.argmin(), shares.shape), np.unravel_index(shares.argmax(), shares.shape)
    text = (f" On this prompt the sinks take **{shares.mean():.1%}** of the attention on average, from "
            f"{shares[low]:.1%} (layer {layers[low[0]]}, head {low[1]}) to {shares[high]:.1%} "
            f"(layer {layers[high[0]]}, head {high[1]}).")
    layer, head = int(state.get("layer")), int(state.get("head"))
    if layer in layers and head < shares.shape[1]:
        text += f" Layer {layer}, head {head}: **{shares[layers.index(layer), head]:.1%}**."
    return intro + text


def sink_note(config, traced) -> None:
    if config.attn_sinks:
        st.info(sink_text(sink_shares(traced.trace), traced.trace.layers))
