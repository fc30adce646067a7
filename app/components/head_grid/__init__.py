"""The Attention page's grid of every head (app/figures/head_grid.py builds its data), drawn on a
<canvas> by a ``st.components.v2`` component in the page's own DOM (plain JavaScript, no build step).

Its data is a few kilobytes, and the component keeps its element across reruns: a new prompt or another
head repaints the canvas in place, where the plotly bar chart it replaced was rebuilt from an empty
element each time (Streamlit keys a chart by its figure; 270 bars). A click on a cell calls ``on_pick``
(layer, head) and reruns the fragment around it. The canvas carries ``txvizCellCenter(layer, head)``
(where a cell, or a point inside it in cell units, is on the screen) and ``txvizCellAt(x, y)`` for tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

from app.components.messages import cell_of, sent
from app.ui import state

HERE = Path(__file__).parent

_mount = st.components.v2.component(
    "txviz_head_grid", js=(HERE / "head_grid.js").read_text(encoding="utf-8"),
    css=(HERE / "head_grid.css").read_text(encoding="utf-8"), isolate_styles=False)


def head_grid(view: dict, *, key: str, on_pick: Callable[[int, int], None]) -> None:
    """Mount the grid ``view`` (``grid_view``); ``on_pick(layer, head)`` runs when a cell is clicked. A
    message that is not a cell of this grid (the browser can send anything) is ignored."""
    layers = view["layers"]  # the layers the grid draws, by number

    def picked() -> None:
        cell = cell_of(sent(state.get(key, None), "pick"), max(layers, default=-1) + 1, view["n_heads"])
        if cell is not None and cell[0] in layers:
            on_pick(*cell)

    _mount(key=key, data=view, on_pick_change=picked)

