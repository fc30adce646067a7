"""The head explorer: the grid of every head, one head's map, the head view, the step-by-step and the
trace download, as one fragment."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.app_pages.attention.head_map import head_map
from app.app_pages.attention.head_table import METRIC_HELP, head_rows
from app.app_pages.attention.head_view import head_view, query_index
from app.app_pages.attention.prompt_pair import prompt_pair
from app.app_pages.attention.step_by_step import step_by_step
from app.components.head_grid import head_grid
from app.figures import big_maps
from app.figures.head_grid import grid_view
from app.services.traces import head_metric_grid
from app.ui import state
from txviz.analysis.heads import export
from txviz.analysis.heads.metrics import METRICS


@st.fragment
def head_explorer(view) -> None:
    """A fragment, so a head picked on the map, a click on the grid or a new query token rerun these
    charts, not the whole page."""
    left, right = st.columns([2, 3], gap="medium")
    with left:
        _all_heads(view.table)
    with right:
        layer, head, hide = head_map(view)
    head_view(view, layer, head, hide)
    _steps(view, layer, head)
    prompt_pair(view, layer, head, hide)
    _download(view, layer, head)
    state.sync_url()  # a rerun of this fragment alone does not pass through main.py's sync


def _all_heads(table) -> None:
    st.subheader("All heads")
    metric = st.selectbox("Colour by", METRICS, key="grid_metric", format_func=lambda m: f"{m} — {METRIC_HELP[m]}")
    grid = head_metric_grid(table, metric)
    head_grid(grid_view(grid, metric=metric, selected=(state.get("layer"), state.get("head"))), key="head_grid",
              on_pick=state.set_head)  # a callback: the layer and head widgets below are drawn with the pick
    undefined = " (grey: undefined for this prompt)." if np.isnan(grid).any() else "."
    st.caption("Click a cell to open that head" + undefined)


def _steps(view, layer: int, head: int) -> None:
    """Lazy: the step-by-step runs (one more traced pass of this layer) only while the expander is open."""
    steps_box = st.expander("Step by step on the real tensors: QKᵀ → scale → mask → softmax → ·V",
                            expanded=False, key="steps_open", on_change="rerun")
    with steps_box:
        if steps_box.open and view.big:  # four T × T matrices: only where the map itself is drawn cell by cell
            st.info(f"Step by step draws every intermediate T × T matrix cell by cell, so it is shown for prompts of "
                    f"up to {big_maps.MAX_MAP_CELLS} tokens; this one has {view.n:,}.")
        elif steps_box.open:
            step_by_step(view.source, view.prompt, view.bos, view.tokens, view.config.n_groups, layer, head,
                         query_index(view.n))


def _download(view, layer: int, head: int) -> None:
    with_map = view.plan is None  # a long prompt's map would be hundreds of megabytes of JSON
    st.download_button(  # data is a function: the JSON is written when the button is pressed, not on every rerun
        "Download this trace (JSON: tokens, every head's metrics" + (", this head's map)" if with_map else ")"),
        lambda: _trace_json(view, layer, head, with_map),
        file_name=f"txviz-trace-L{layer}H{head}.json", mime="application/json", key="download_trace", on_click="ignore")


def _trace_json(view, layer: int, head: int, with_map: bool) -> str:
    """The download's JSON. Streamlit keeps the button's function for as long as it keeps the session (and,
    for a session it drops without closing, until app/ui/departed.py releases it): the function holds the
    view, whose trace is held weakly, never the trace itself."""
    traced = view.traced
    return export.trace_json(model=view.source, prompt=view.prompt, bos=view.bos, ids=traced.ids,
                             tokens=traced.tokens, offsets=traced.offsets, head_rows=head_rows(view.table),
                             maps={(layer, head): traced.trace.attn(layer, head)} if with_map else {})
