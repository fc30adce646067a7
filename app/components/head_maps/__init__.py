"""Every head of one layer in the browser: the page sends the layer's maps once (float16, all heads;
app/figures/head_maps.py builds the payload) and a click on a head, or ← / →, repaints the map in the
browser with no Streamlit rerun (issue 14: a round trip redrew several figures and took 0.5–5 s).

A ``st.components.v2`` component: plain JavaScript mounted in the page itself (no iframe, no build
step). It draws with the plotly.js that ships inside the installed ``plotly`` package, served by
Streamlit's own file route for a v1 component declared on that package folder (nothing is copied or
fetched). When every layer fits the byte budget (app/figures/head_maps.py) a layer switch is in the
browser too. The page's other views follow the page's layer and head; "Show … in the views below" is
the one action here that round-trips (a trigger that sets the page's layer and head).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st
import streamlit.components.v1 as components_v1

HERE = Path(__file__).parent
NAME = "txviz_head_maps"
PLOTLY_ASSETS = "plotly_js"

_mount = st.components.v2.component(
    NAME, js=(HERE / "head_maps.js").read_text(encoding="utf-8"),
    css=(HERE / "head_maps.css").read_text(encoding="utf-8"), isolate_styles=False)  # plotly styles the page


def plotly_js_url() -> str:
    """Where the browser gets plotly.min.js: the installed plotly package's own copy, served by Streamlit
    (registered on each run: the registry belongs to the running server)."""
    import plotly

    folder = Path(plotly.__file__).parent / "package_data"
    asset = components_v1.declare_component(PLOTLY_ASSETS, path=str(folder))
    base = st.get_option("server.baseUrlPath").strip("/")
    return "/" + "/".join(p for p in (base, "component", asset.name, "plotly.min.js") if p)


def head_maps(payload: dict, *, key: str, on_open: Callable[[int, int], None]) -> None:
    """Mount the component on ``payload`` (``app.figures.head_maps.head_maps_payload``); ``on_open(layer,
    head)`` runs when the reader asks for the head picked here in the rest of the page."""

    def opened() -> None:
        picked = st.session_state[key].get("open")
        if picked is not None:
            on_open(int(picked["layer"]), int(picked["head"]))

    _mount(key=key, data={**payload, "plotly_url": plotly_js_url()}, on_open_change=opened)
