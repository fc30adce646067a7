"""What the head maps component (app/components/head_maps) receives, in two parts, so that a switch
of head or layer sends no maps again:

- the maps: one binary blob per (prompt, sink, layers sent) — a small JSON header (each layer and
  head's title, colour cap and metrics line) followed by every head of those layers as little-endian
  float16, NaN for the future (``maps_blob``). It is the same bytes on every rerun of a prompt, so a
  change of the page's head or layer sends Streamlit's reference to the browser's copy, not the maps;
- the view: the page's layer and head and the plotly figure the usual builders make for it, with its
  z and plotly's theme left out (``view_data``), a few kilobytes: the browser draws it on a canvas.

The browser keeps every blob it got for the prompt by layer, swaps z, zmax and the title to show another
head or layer, and asks the server for a layer it lacks. Pure, no Streamlit.

Byte budget: every layer goes in one blob when their maps take at most ``ALL_LAYERS_BYTES`` (SmolLM2
at 64 tokens: 30 × 9 × 64² × 2 B = 2.2 MB), so a layer switch never leaves the browser; past that, one
layer per blob, sent when the page or the reader asks for it: cell by cell up to MAX_MAP_CELLS tokens
(9 × 256² × 2 B = 1.2 MB), pooled to 256² per head past that. float16 keeps about 3 significant
digits, and the hover says so; the plain chart (and a long map's region) shows the model's own weights.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import struct

import numpy as np
import plotly.graph_objects as go

from app.figures import big_maps, charts

ALL_LAYERS_BYTES = 3 * 1024 * 1024  # the float16 maps of every layer in one blob
MAX_BLOB_BYTES = 4 * 1024 * 1024  # one layer: 9 heads × 256² × 2 B = 1.2 MB on SmolLM2
MAGIC = b"TXHM"  # then the header's length (uint32, little-endian), the header, the maps
ROUNDED_HOVER = " ≈%{z:.3r}"  # float16: 3 significant digits, said as such (d3-format "r": no exponent)


def layers_to_send(n_layers: int, n_heads: int, rows: int, cols: int, layer: int) -> list[int]:
    """Every layer when their float16 maps fit ``ALL_LAYERS_BYTES``, else ``layer`` alone."""
    return list(range(n_layers)) if all_layers_fit(n_layers, n_heads, rows, cols) else [layer]


def all_layers_fit(n_layers: int, n_heads: int, rows: int, cols: int) -> bool:
    return n_layers * n_heads * rows * cols * 2 <= ALL_LAYERS_BYTES


def prompt_id(*parts) -> str:
    """A short name for what the maps were computed from (model, prompt, sink, hide): the browser files
    every blob of one prompt under it."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def maps_blob(maps: np.ndarray, block: int, *, prompt: str, layers: list[int], titles: list[list[str]],
              captions: list[list[str]]) -> bytes:
    """``maps`` (layers, heads, rows, cols) float16 with NaN for the future (block > 1: pooled) and one
    title and metrics line per layer and head, as the bytes the browser decodes."""
    raw = np.ascontiguousarray(maps, dtype="<f2").tobytes()
    if len(raw) > MAX_BLOB_BYTES:
        raise ValueError(f"{len(raw):,} bytes of maps are over the component's budget of {MAX_BLOB_BYTES:,}")
    drawn = maps.astype(np.float32)
    if block == 1:  # each map's largest weight (1.0 for a map with none), in one reduction
        top = np.where(np.isfinite(drawn), drawn, -np.inf).max(axis=(-2, -1), initial=-np.inf)
        zmax = np.where(np.isfinite(top), top, 1.0).tolist()
        colorbar = None
    else:
        zmax = [[big_maps.color_cap(m) for m in layer] for layer in drawn]
        colorbar = [[f"max<br>(capped at<br>{top:.2f})" for top in layer] for layer in zmax]
    header = json.dumps({"prompt_id": prompt, "layers": layers, "shape": list(maps.shape), "block": block,
                         "titles": titles, "captions": captions, "zmax": zmax, "colorbar_titles": colorbar}).encode()
    header += b" " * (len(header) % 2)  # the maps start on an even byte
    return MAGIC + struct.pack("<I", len(header)) + header + raw


def read_blob(blob: bytes) -> tuple[dict, np.ndarray]:
    """(header, maps as float32) back from ``maps_blob``: what the browser's decoder computes."""
    if blob[:4] != MAGIC:
        raise ValueError("not a head maps blob")
    (size,) = struct.unpack("<I", blob[4:8])
    header = json.loads(blob[8:8 + size])
    maps = np.frombuffer(blob[8 + size:], dtype="<f2").astype(np.float32).reshape(header["shape"])
    return header, maps


def head_figure(drawn: np.ndarray, tokens: list[str], block: int, n_tokens: int, title: str) -> go.Figure:
    """One head's figure as the plain chart draws it: every cell, or pooled blocks of a long prompt."""
    if block == 1:
        return charts.attention_heatmap(np.nan_to_num(drawn, nan=0.0), tokens, tokens, title=title)
    return big_maps.pooled_attention(drawn, block, n_tokens, title=title)


def view_data(tokens: list[str], *, prompt: str, block: int, cells: int, n_layers: int, n_heads: int,
              all_layers: bool, layer: int, head: int, title: str) -> dict:
    """The component's view: the page's layer and head and the figure the usual builders make for it
    (z left out: every z travels in a blob), small enough to send on every rerun."""
    blank = np.zeros((cells, cells), dtype=np.float32)  # the browser fills in z, zmax and the colour bar
    figure = head_figure(blank, tokens, block, len(tokens), title)
    figure.data[0].z = None  # not written out only to be dropped
    spec = json.loads(figure.to_json())
    spec["layout"].pop("template", None)  # plotly's theme: the canvas does not read it (~9 KB a rerun)
    trace = spec["data"][0]
    trace["z"] = None
    trace["x"], trace["y"] = _plain(trace["x"]), _plain(trace["y"])  # the canvas reads labels, not plotly's bdata
    trace["hovertemplate"] = trace["hovertemplate"].replace(" %{z:.4f}", ROUNDED_HOVER).replace(
        "<extra></extra>", "<br>(float16 in the browser: 3 significant digits)<extra></extra>")
    return {"prompt_id": prompt, "layer": layer, "head": head, "n_layers": n_layers, "n_heads": n_heads,
            "all_layers": all_layers, "title_suffix": spec["layout"]["title"]["text"][len(title):], "figure": spec}


def _plain(values) -> list:
    """An axis's labels as a list: plotly writes a numeric array as {"dtype", "bdata"} (base64)."""
    if isinstance(values, dict) and "bdata" in values:
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return [html.unescape(v) if isinstance(v, str) else v for v in values]  # the canvas writes text, not tags
