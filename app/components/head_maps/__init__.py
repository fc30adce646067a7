"""Every head of the Attention page's map in the browser (issue 14: a round trip redrew several figures
and took 0.5–5 s). A click on a head, ← / →, ↑ / ↓ or the component's layer slider repaints the map in
the browser with no Streamlit rerun when that layer is already there.

Two mounts of one ``st.components.v2`` component (plain JavaScript in the page itself, no iframe, no
build step; app/figures/head_maps.py builds both parts):

- the maps (``key + "_maps"``): a binary blob per prompt and layers sent. It is the same bytes on every
  rerun of a prompt, so a change of the page's head sends a reference, not the 2.2 MB again;
- the view (``key``): the page's layer and head and the figure, a few kilobytes.

The browser files every blob it got by prompt and layer. When the layers do not all fit one blob (a long
prompt) and the reader asks for a layer it lacks, the component asks the server for it
(``on_layer``): only the fragment around the two mounts reruns and sends that layer's blob. Once the
reader's layer is painted and the page is idle, the component asks the same way for its neighbours
(±1, then ±2; one request in flight, under a byte cap per prompt), so ↑ / ↓ to a neighbour is
client-side; the page's own layer and head never move for it.

It draws each map on a <canvas> (canvas_heatmap.js: the cells, token labels, colour bar and hover of
the plotly figure the view carries); drawing it with plotly.js made the browser parse a second 3.5 MB
copy of plotly and relayout a whole figure per repaint, which cost more than the map (BENCHMARKS.md).
"Show … in the views below" is the one action that moves the rest of the page (``on_open``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

HERE = Path(__file__).parent
NAME = "txviz_head_maps"
SCRIPTS = ("canvas_heatmap.js", "head_maps.js")  # one module: the drawing, then the component that calls it

_mount = st.components.v2.component(
    NAME, js="\n".join((HERE / name).read_text(encoding="utf-8") for name in SCRIPTS),
    css=(HERE / "head_maps.css").read_text(encoding="utf-8"),
    isolate_styles=False)  # in the page's own DOM, where the tests and the benchmark find the map


def head_maps(blob: bytes, view: dict, *, key: str, on_open: Callable[[int, int], None],
              on_layer: Callable[[int], None]) -> None:
    """Mount the maps ``blob`` (``maps_blob``) and the ``view`` (``view_data``). ``on_open(layer, head)``
    runs when the reader asks for the head picked here in the rest of the page; ``on_layer(layer)`` when
    the reader picked a layer the browser does not have."""

    def opened() -> None:
        picked = st.session_state[key].get("open")
        if picked is not None:
            on_open(int(picked["layer"]), int(picked["head"]))

    def wanted() -> None:
        layer = st.session_state[key].get("layer")
        if layer is not None:
            on_layer(int(layer))

    with st.container(gap=None):
        _mount(key=key, data=view, on_open_change=opened,
               on_layer_change=wanted)
        _mount(key=f"{key}_maps", data=blob)
