"""Every head of the Attention page's map in the browser, and the page's one control of its layer and
head. A click on a head, ← / →, ↑ / ↓ or the component's layer slider repaints the map in the browser
with no Streamlit rerun when that layer is already there (a round trip redrew several figures and took
0.5–5 s); once the map is painted and the reader has stopped, the component sends the head back and the
page's selection follows it (the grid's highlight, the head view, the step by step, the download), so
the page never shows two heads at once and has one Layer control, not two.

Two mounts of one ``st.components.v2`` component (plain JavaScript in the page itself, no iframe, no
build step; payload.py beside it says what both parts hold, build.py builds them from the page's view):

- the view (``key``): the page's layer and head and the figure, a few kilobytes, mounted where the rest
  of the head's views are, so a pick reruns them with it (``on_pick``);
- the maps (``key + "_maps"``): a binary blob per prompt and layers sent. It is the same bytes on every
  rerun of a prompt, so a change of the page's head sends a reference, not the 2.2 MB again. It is
  mounted in a fragment of its own.

The browser files every blob it got by prompt and layer. When the layers do not all fit one blob (a long
prompt), a pick of a layer the browser lacks brings that layer with the page's rerun; and once the
reader's layer is painted and the page is idle, the maps mount asks for its neighbours (±1, then ±2; one
request in flight, under a byte cap per prompt; ``on_layer``), which reruns the maps' fragment alone, so
↑ / ↓ to a neighbour paints at once; the page's selection never moves for a prefetch.

It draws each map on a <canvas> (canvas_heatmap.js: the cells, token labels, colour bar and hover of
the plotly figure the view carries); drawing it with plotly.js made the browser parse a second 3.5 MB
copy of plotly and relayout a whole figure per repaint, which cost more than the map (BENCHMARKS.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

from app.components.messages import cell_of, index_of, sent
from app.ui import state

HERE = Path(__file__).parent
NAME = "txviz_head_maps"
# one module: the colour scales, the drawing, then the component that calls it
SCRIPTS = (HERE.parent / "colour_ramp.js", HERE / "canvas_heatmap.js", HERE / "head_maps.js")

_mount = st.components.v2.component(
    NAME, js="\n".join(path.read_text(encoding="utf-8") for path in SCRIPTS),
    css=(HERE / "head_maps.css").read_text(encoding="utf-8"),
    isolate_styles=False)  # in the page's own DOM, where the tests and the benchmark find the map


def head_maps_view(view: dict, *, key: str, on_pick: Callable[[int, int], None]) -> None:
    """Mount the ``view`` (``view_data``): the map and its controls, the page's one control of its layer
    and head. ``on_pick(layer, head)`` runs when the reader has stopped on a head here (the map painted it
    already); a message that is not a head of this model (the browser can send anything) is ignored."""

    def picked() -> None:
        cell = cell_of(sent(state.get(key, None), "pick"), view["n_layers"], view["n_heads"])
        if cell is not None:
            on_pick(*cell)

    _mount(key=key, data=view, on_pick_change=picked)


def head_maps_blob(blob: bytes, *, key: str, n_layers: int, on_layer: Callable[[int], None]) -> None:
    """Mount the maps ``blob`` (``maps_blob``) under ``key + "_maps"``. ``on_layer(layer)`` runs when the
    browser asks for a layer it does not have (its neighbours' prefetch); a message that is not a layer
    of this model is ignored. Called inside its own fragment, so that request reruns the maps alone."""

    def wanted() -> None:
        layer = index_of(sent(state.get(f"{key}_maps", None), "layer"), n_layers)
        if layer is not None:
            on_layer(layer)

    _mount(key=f"{key}_maps", data=blob, on_layer_change=wanted)
