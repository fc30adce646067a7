"""What the head maps component (app/components/head_maps) receives: every head of the layers sent as
float16 in base64, the plotly figure of the page's head built by the usual builders (so axes, hover and
colours are those of the plain chart), and per layer and head its title, colour cap and metrics line.
The browser swaps z, zmax and the title to show another head or layer. Pure, no Streamlit.

Byte budget: every layer goes to the browser when their maps take at most ``ALL_LAYERS_BYTES``
(SmolLM2 at 64 tokens: 30 × 9 × 64² × 2 B = 2.2 MB, 2.9 MB in base64), so a layer switch is in the
browser too; past that, the page's layer alone (a layer switch is then a round trip), up to
MAX_MAP_CELLS tokens cell by cell (9 × 256² × 2 B = 1.2 MB) and pooled to 256² per head past that.
A rerun that changes none of the data (the head view's query token, an expander) costs no bytes:
Streamlit sends a message it sent before as a reference to the browser's copy.
"""

from __future__ import annotations

import base64
import hashlib
import json

import numpy as np
import plotly.graph_objects as go

from app.figures import big_maps, charts

ALL_LAYERS_BYTES = 3 * 1024 * 1024  # the float16 maps of every layer, before base64
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024  # base64 of one layer: 9 heads × 256² × 2 B = 1.6 MB on SmolLM2


def layers_to_send(n_layers: int, n_heads: int, rows: int, cols: int, layer: int) -> list[int]:
    """Every layer when their float16 maps fit ``ALL_LAYERS_BYTES``, else the page's layer alone."""
    return list(range(n_layers)) if n_layers * n_heads * rows * cols * 2 <= ALL_LAYERS_BYTES else [layer]


def encode_maps(maps: np.ndarray) -> tuple[str, str]:
    """(base64 of the little-endian float16 bytes, a short digest that names them)."""
    raw = np.ascontiguousarray(maps, dtype="<f2").tobytes()
    return base64.b64encode(raw).decode("ascii"), hashlib.blake2b(raw, digest_size=8).hexdigest()


def decode_maps(text: str, shape: list[int]) -> np.ndarray:
    """The maps back from ``encode_maps`` (float32; what the browser's decoder computes)."""
    return np.frombuffer(base64.b64decode(text), dtype="<f2").astype(np.float32).reshape(shape)


def head_figure(drawn: np.ndarray, tokens: list[str], block: int, n_tokens: int, title: str) -> go.Figure:
    """One head's figure as the plain chart draws it: every cell, or pooled blocks of a long prompt."""
    if block == 1:
        return charts.attention_heatmap(np.nan_to_num(drawn, nan=0.0), tokens, tokens, title=title)
    return big_maps.pooled_attention(drawn, block, n_tokens, title=title)


def maps_data(maps: np.ndarray, block: int, *, layers: list[int], titles: list[list[str]],
              captions: list[list[str]]) -> dict:
    """The bulky part, the same on every rerun of one prompt: ``maps`` (layers, heads, rows, cols)
    float16 with NaN for the future (block > 1: pooled), one title and metrics line per layer and head."""
    text, digest = encode_maps(maps)
    if len(text) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"{len(text):,} bytes of maps are over the component's budget of {MAX_PAYLOAD_BYTES:,}")
    drawn = maps.astype(np.float32)
    if block == 1:
        zmax = [[float(np.nanmax(m)) if np.isfinite(m).any() else 1.0 for m in layer] for layer in drawn]
        colorbar = None
    else:
        zmax = [[big_maps.color_cap(m) for m in layer] for layer in drawn]
        colorbar = [[f"max<br>(capped at<br>{top:.2f})" for top in layer] for layer in zmax]
    return {"layers": layers, "n_heads": maps.shape[1], "shape": list(maps.shape), "block": block, "maps": text,
            "maps_id": digest, "titles": titles, "captions": captions, "zmax": zmax, "colorbar_titles": colorbar}


def head_maps_payload(data: dict, tokens: list[str], *, layer: int, head: int) -> dict:
    """The component's data: ``maps_data`` and the page's layer and head, with the figure the usual
    builders make for it (its z left out: every z travels once, in ``maps``)."""
    title = data["titles"][data["layers"].index(layer)][head]
    blank = np.zeros(data["shape"][2:], dtype=np.float32)  # the browser fills in z, zmax and the colour bar
    figure = head_figure(blank, tokens, data["block"], len(tokens), title)
    spec = json.loads(figure.to_json())
    spec["data"][0]["z"] = None
    spec["data"][0]["zsmooth"] = "fast"  # one pixel per cell, scaled by the browser: ~40% less time per repaint
    for axis in ("xaxis", "yaxis"):  # room for the token labels (st.plotly_chart sets this itself)
        spec["layout"].setdefault(axis, {})["automargin"] = True
    suffix = spec["layout"]["title"]["text"][len(title):]  # the builder may add to the title (pooled: the block)
    return {**data, "titles": [[t + suffix for t in layer_titles] for layer_titles in data["titles"]],
            "layer": layer, "head": head, "figure": spec}
