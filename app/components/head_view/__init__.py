"""The Attention page's head view (lines from one query token to the keys it reads) drawn as SVG by a
``st.components.v2`` component in the page's own DOM (plain JavaScript, no build step).

It draws the plotly figure ``charts.head_view`` builds (its line traces, with their width, colour and
hover text, and its two columns of token labels), sent as JSON. Streamlit keys a plotly chart by its
figure, so the chart it replaced was rebuilt from an empty element on every new prompt, head or query
token (the largest of the page's figure costs in chromium); the component keeps its element
and redraws in place.
"""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

HERE = Path(__file__).parent

_mount = st.components.v2.component(
    "txviz_head_view", js=(HERE / "head_view.js").read_text(encoding="utf-8"),
    css=(HERE / "head_view.css").read_text(encoding="utf-8"), isolate_styles=False)


def head_view(figure: go.Figure, *, key: str) -> None:
    """Mount the head view ``figure`` (``charts.head_view``: line traces, then two text traces)."""
    spec = json.loads(figure.to_json())
    spec["layout"].pop("template", None)  # plotly's theme: the SVG does not read it
    _mount(key=key, data={"figure": spec})
