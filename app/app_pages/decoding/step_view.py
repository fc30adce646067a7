"""One step of the run, chosen in the browser's step viewer (app/components/decoding_steps): the
generated tokens, the layer and head, and the step's charts and facts — what the sampler chose between
and what it drew, the new token's attention, the cache's bytes against the formula, the step's time —
all drawn there from the run's records, so a scrub or a layer / head change never waits for the server.
Then the parts that need the server, which follow the step the viewer sends back: the same step timed
without the cache, and the branches from its candidates. A fragment: what the viewer sends reruns this
part alone (the model does not run again)."""

from __future__ import annotations

import streamlit as st

from app.app_pages.decoding import attention, branches, scrubber
from app.components.decoding_steps import decoding_steps
from app.services import decoding
from app.ui import state
from app.ui.widgets import plain

KEPT_TIMINGS = 64  # steps timed without the cache that a session keeps
HOW_TO_READ = (
    "**Reading a step.** Pick a generated token (its pill, the slider, or ← / → once the viewer has focus). "
    "*Top next tokens*: the model's most probable candidates — grey its raw softmax, light blue after the "
    "temperature, dark blue the distribution the sampler drew from (top-k / top-p cut it at the dashed line, "
    "then it is renormalised); the drawn token is outlined, and a click on another candidate's bars branches "
    "from there. *Layer, head*: the attention row of the query that produced this token — its weight on every "
    "earlier position (grey: keys a sliding window no longer sees). *KV cache per layer*: the bytes the cache "
    "holds (bars) against the formula (line). *Every head*: the same row for each head of the layer, darker "
    "for more weight.")


@st.fragment
def draw(view) -> None:
    index = scrubber.chosen_step(view)
    layer, head = attention.layer_and_head(view)
    blob, layers = attention.blob(view, layer)
    config = view.config
    st.caption(HOW_TO_READ)
    decoding_steps({"run_id": attention.run_key(view), "step": index, "layer": layer, "head": head,
                    "n_layers": config.n_layers, "n_heads": config.n_heads, "all_layers": len(layers) == config.n_layers},
                   blob, key="dec_steps", n_steps=len(view.run.steps), on_pick=scrubber.picked,
                   on_branch=lambda step, token: branches.clicked(view, step, token))
    time_without_cache(view, index)
    branches.draw(view, index)


def time_without_cache(view, index: int) -> None:
    """The step's time with the cache is in the viewer; on demand, the same step without it."""
    step = view.run.steps[index]
    line, button = st.empty(), st.empty()
    uncached = state.get("_decoding_uncached", {}).get((view.inputs, view.run.new_ids, index))
    if uncached is None and index > 0 and button.button(f"Time step {index} without the cache", key="dec_uncached",
                                                        help="Runs every token before this one again, once."):
        uncached = _time_without_cache(view, index)
        button.empty()
    if uncached is not None:
        line.markdown(f"Step {index} without the cache (all {step.position} tokens again): **{uncached * 1000:.0f} ms**, "
                      f"against **{step.seconds * 1000:.0f} ms** with it.")
    if step.forced:
        st.caption(plain("A branch's own step: its distribution is the run's, read from the same cache."))


def _time_without_cache(view, index: int) -> float:
    seconds = decoding.seconds_without_cache(view.loaded, view.run, index)
    timings = dict(list(state.get("_decoding_uncached", {}).items())[-KEPT_TIMINGS + 1:])
    timings[(view.inputs, view.run.new_ids, index)] = seconds
    state.put("_decoding_uncached", timings)
    return seconds
