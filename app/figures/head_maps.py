"""What the head maps component (app/components/head_maps) receives: every head of one layer as
float16 in base64, the plotly figure of the page's head built by the usual builders (so titles, axes,
hover and colours are those of the plain chart), and per head its title, colour cap and metrics line.
The browser swaps z, zmax and the title to show another head. Pure, no Streamlit.

Byte budget: one layer is sent at a time (a layer switch is a round trip of the fragment that holds
the map). At 64 tokens a layer of SmolLM2 is 9 × 64² × 2 B = 74 KB (98 KB in base64); maps are sent
cell by cell up to MAX_MAP_CELLS tokens (9 × 256² × 2 B = 1.2 MB) and pooled to 256² per head past
that, so a payload stays under ``MAX_PAYLOAD_BYTES`` whatever the prompt's length. Every layer at
64 tokens would be 2.2 MB, re-sent on every rerun of the fragment: not worth a layer switch's round trip.
"""

from __future__ import annotations

import base64
import hashlib
import json

import numpy as np
import plotly.graph_objects as go

from app.figures import big_maps, charts

MAX_PAYLOAD_BYTES = 4 * 1024 * 1024  # base64 of a layer's maps: 9 heads × 256² × 2 B = 1.6 MB on SmolLM2


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


def head_maps_payload(maps: np.ndarray, block: int, tokens: list[str], *, layer: int, head: int, titles: list[str],
                      captions: list[str]) -> dict:
    """The component's data: ``maps`` (heads, rows, cols) float16 with NaN for the future (block > 1:
    pooled), ``head`` the page's head, one title and metrics caption per head."""
    n_heads = maps.shape[0]
    drawn = maps.astype(np.float32)
    text, digest = encode_maps(maps)
    if len(text) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"{len(text):,} bytes of maps are over the component's budget of {MAX_PAYLOAD_BYTES:,}")
    figure = head_figure(drawn[head], tokens, block, len(tokens), titles[head])
    if block == 1:
        zmax = [float(np.nanmax(m)) if np.isfinite(m).any() else 1.0 for m in drawn]
        colorbar = None
    else:
        zmax = [big_maps.color_cap(m) for m in drawn]
        colorbar = [f"max<br>(capped at<br>{top:.2f})" for top in zmax]
    spec = json.loads(figure.to_json())
    spec["data"][0]["z"] = None  # every head's z travels once, in ``maps``
    spec["data"][0]["zsmooth"] = "fast"  # one pixel per cell, scaled by the browser: ~40% less time per repaint
    for axis in ("xaxis", "yaxis"):  # room for the token labels (st.plotly_chart sets this itself)
        spec["layout"].setdefault(axis, {})["automargin"] = True
    shown_title = spec["layout"]["title"]["text"]  # the builder may add to the title (the pooled block size)
    return {"layer": layer, "head": head, "n_heads": n_heads, "shape": list(maps.shape), "block": block,
            "maps": text, "maps_id": f"{digest}-{layer}", "figure": spec,
            "titles": [shown_title.replace(titles[head], t, 1) for t in titles], "captions": captions,
            "zmax": zmax, "colorbar_titles": colorbar}
