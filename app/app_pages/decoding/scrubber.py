"""The step scrubber: a slider over the generated tokens and the tokens themselves as buttons; a click on
a token or a move of the slider chooses the step every section below shows. It starts again at step 0
for another run."""

from __future__ import annotations

import streamlit as st

from app.ui import state
from app.ui.widgets import plain
from txviz.loading.tokenizer.token_text import visible_controls


def token_label(text: str) -> str:
    """A token as a button reads it: spaces and line ends shown, Markdown's characters escaped."""
    return plain(visible_controls(text).replace(" ", "␣").replace("\n", "↵") or "∅")


def _picked() -> None:
    picked = state.get("dec_pick", None)
    if picked is not None:
        state.put("dec_step", int(picked))


def chosen_step(view) -> int:
    """The step chosen (0-based), after drawing the slider and the token buttons."""
    n = len(view.run.steps)
    state.follow(("dec_step", "dec_pick"), (view.inputs, view.run.new_ids), {"dec_step": 0})
    state.put("dec_step", min(max(int(state.get("dec_step", 0) or 0), 0), n - 1))
    state.put("dec_pick", state.get("dec_step"))  # the button of the step the slider chose is the pressed one
    texts = view.generated()
    if n > 1:
        st.slider("Step", 0, n - 1, key="dec_step",
                  help="Move through the generated tokens; every chart below shows the step chosen.")
    # each label carries its step: Streamlit's pills tell options apart by their label, so a token written
    # twice ("␣lazy" at steps 7 and 9) would open the other step
    st.pills("Generated tokens (click one to show its step)", list(range(n)), key="dec_pick", on_change=_picked,
             format_func=lambda i: f"{token_label(texts[i])} :gray[{i}]", label_visibility="collapsed")
    return int(state.get("dec_step"))
