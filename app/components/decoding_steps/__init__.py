"""The Decoding page's step viewer in the browser: the generated tokens as pills and a slider (← / →),
the layer and head, and the chosen step's charts and facts — the sampler's bars (the cut dashed, the
drawn token outlined), the new token's attention row (a window's cut shaded) and every head of the layer,
the cache's bytes per layer against the formula, the step's time. A scrub or a layer / head change
redraws in the browser from the run's records, with no message to the server for the charts (a round
trip of Streamlit's and plotly's redraw took 200-500 ms a scrub).

Two mounts of one ``st.components.v2`` component (plain JavaScript in the page's own DOM, no build
step; payload.py says what they hold):

- the records (``key + "_run"``): one binary blob per run (and per layer, past the byte budget), the
  same bytes on every rerun, so Streamlit sends a reference to the browser's copy, not the rows again;
- the view (``key``): the run's id and the page's step, layer and head, a few bytes, where the viewer
  is drawn.

Once a step is painted and the reader has stopped, the viewer sends (step, layer, head) back
(``on_pick``), and the server's parts of the step follow it (the branches from its candidates, the
time without the cache, the URL's layer and head); a click on a candidate's bar asks for a branch
from it (``on_branch``). Past the byte budget a layer the browser lacks is asked for at once, and the
page's rerun brings it."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

from app.components.messages import index_of, sent
from app.ui import state

HERE = Path(__file__).parent
NAME = "txviz_decoding_steps"

SCRIPTS = (HERE.parent / "colour_ramp.js", HERE / "decoding_steps.js")  # one module: the colour scales, then the viewer

_mount = st.components.v2.component(
    NAME, js="\n".join(path.read_text(encoding="utf-8") for path in SCRIPTS),
    css=(HERE / "decoding_steps.css").read_text(encoding="utf-8"),
    isolate_styles=False)  # in the page's own DOM, where the tests and the latency probe read the charts


def pick_of(value, n_steps: int, n_layers: int, n_heads: int) -> tuple[int, int, int] | None:
    """``{"step", "layer", "head"}`` from the browser as ints inside the run and the model; None for
    anything else (the browser can send anything)."""
    if not isinstance(value, dict):
        return None
    picked = (index_of(value.get("step"), n_steps), index_of(value.get("layer"), n_layers),
              index_of(value.get("head"), n_heads))
    return None if None in picked else picked


def branch_of(value, n_steps: int) -> tuple[int, int] | None:
    """``{"step", "token"}`` (a candidate's id) as ints; None for anything else."""
    if not isinstance(value, dict):
        return None
    step, token = index_of(value.get("step"), n_steps), value.get("token")
    if step is None or isinstance(token, bool) or not isinstance(token, int) or token < 0:
        return None
    return step, token


def decoding_steps(view: dict, blob: bytes, *, key: str, n_steps: int,
                   on_pick: Callable[[int, int, int], None], on_branch: Callable[[int, int], None]) -> None:
    """Mount the run's ``blob`` (``steps_blob``) and the ``view`` (run_id, step, layer, head, n_layers,
    n_heads, all_layers). ``on_pick(step, layer, head)`` runs when the reader stopped on a step, layer
    and head (the viewer painted them already); ``on_branch(step, token)`` on a click on a candidate."""

    def picked() -> None:
        cell = pick_of(sent(state.get(key, None), "pick"), n_steps, view["n_layers"], view["n_heads"])
        if cell is not None:
            on_pick(*cell)

    def branched() -> None:
        asked = branch_of(sent(state.get(key, None), "branch"), n_steps)
        if asked is not None:
            on_branch(*asked)

    _mount(key=f"{key}_run", data=blob)
    _mount(key=key, data=view, on_pick_change=picked, on_branch_change=branched)
