"""The chosen step: the browser's step viewer (app/components/decoding_steps) scrubs through the
generated tokens on its own and, once the reader stops, sends the step (with the layer and head) back
here, so the parts of the step the server draws follow it. It starts again at step 0 for another run."""

from __future__ import annotations

from app.ui import state
from app.ui.widgets import plain
from txviz.loading.tokenizer.token_text import visible_controls


def token_label(text: str) -> str:
    """A token as a button reads it: spaces and line ends shown, Markdown's characters escaped."""
    return plain(visible_controls(text).replace(" ", "␣").replace("\n", "↵") or "∅")


def picked(step: int, layer: int, head: int) -> None:
    """The step, layer and head the reader stopped on in the viewer (its handler: before the page draws)."""
    state.put("dec_step", int(step))
    state.set_head(layer, head)


def chosen_step(view) -> int:
    """The step chosen (0-based): step 0 for a run other than the last one shown, kept inside the run."""
    n = len(view.run.steps)
    state.follow("dec_step", (view.inputs, view.run.new_ids), {"dec_step": 0})
    state.put("dec_step", min(max(int(state.get("dec_step", 0) or 0), 0), n - 1))
    return int(state.get("dec_step"))
