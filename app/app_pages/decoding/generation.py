"""Generate on a click: the tokens stream in as each step is drawn, a Stop ends the run after the token
under way and keeps what it made. Runs are kept for this session by the inputs they came from, so the
page shows the run of the settings on screen, or none: never one made from other inputs."""

from __future__ import annotations

import time

import streamlit as st

from app import cache
from app.figures import charts
from app.services import decoding
from app.services.prompts import PromptError
from app.ui import state
from app.ui.widgets import plain

GENERATION = state.StoppableRun("decoding", "Ends the generation after the token under way; the tokens so far are kept.")
KEPT_RUNS = 4  # runs a session keeps (each holds its cache and every step's attention rows: a few MB)


def kept_run(inputs: decoding.DecodingInputs):
    return state.get("_decodings", {}).get(inputs)


def keep_run(inputs: decoding.DecodingInputs, run) -> None:
    runs = {key: value for key, value in state.get("_decodings", {}).items() if key != inputs}
    while len(runs) >= KEPT_RUNS:
        runs.pop(next(iter(runs)))
    state.put("_decodings", {**runs, inputs: run})
    state.put("_decoding_branches", {key: value for key, value in state.get("_decoding_branches", {}).items()
                                     if key[0] in runs or key[0] == inputs})


def draw(loaded, inputs: decoding.DecodingInputs):
    """The run of ``inputs``: generated now on a click, else the one kept; None when there is none yet."""
    try:
        ids, read = decoding.prompt_reading(loaded, inputs, cache.limits())
    except PromptError as error:
        st.warning(plain(error))
        return None
    with st.spinner("Keeping the tokens of the run the click stopped…"):
        stopped = GENERATION.finishing(inputs)  # a click stopped this very run a moment ago
    if stopped is not None:
        keep_run(inputs, stopped)
    run = kept_run(inputs)
    label = "Generate again" if run is not None else "Generate"
    if st.button(label, key="dec_generate", type="primary",
                 help=f"{inputs.max_new_tokens} new tokens after the {len(ids)} tokens of the prompt"):
        run = stream(loaded, inputs, ids)
    elif run is None:
        st.info(f"Press **Generate** to write up to {inputs.max_new_tokens} tokens after the prompt's {len(ids)}.")
    say_tokens_read(read, loaded.tokenizer)
    return run


def say_tokens_read(read: decoding.TokensRead, tokenizer) -> None:
    """How many tokens the model reads, and why that is not the sidebar's count when it is not."""
    said = f"The model reads **{read.read} tokens**"
    if read.read == read.sidebar and not read.template:
        st.caption(f"{said}, the sidebar's count: the prompt as it is.")
        return
    said += (f", not the sidebar's {read.sidebar}: the chat template wraps the prompt in {read.template} tokens of "
             "its own (the user's turn markers, and any system text the template adds)")
    if read.first_in_template is not None:
        said += (f"; the template opens with {plain(tokenizer.display(read.first_in_template))}, the token the "
                 "sidebar counts before the prompt, so it is not put in front a second time")
    st.caption(said + ".")


def stream(loaded, inputs: decoding.DecodingInputs, ids: list[int]):
    """Generate, showing every token as it is drawn; a click on Stop ends it and keeps the tokens so far."""
    tokens, started = [], time.perf_counter()
    with GENERATION.held(inputs) as hold:
        shown, note = st.empty(), st.empty()

        def on_step(step) -> None:
            tokens.append(step.token.text or f"#{step.token.id}")
            hold.show(shown.markdown, charts.token_strip_html(tokens, [False] * len(tokens)), unsafe_allow_html=True)
            hold.show(note.caption, f"token {len(tokens)} of at most {inputs.max_new_tokens}, "
                                    f"{time.perf_counter() - started:.1f} s")

        run = decoding.run(loaded, inputs, ids, on_step=on_step, should_stop=hold.asked)
        hold.keep(run)  # first: a stopped run's next session-state write may raise (StoppableRun.finishing)
        keep_run(inputs, run)
        hold.show(shown.empty)
        hold.show(note.empty)
    return run


def say_how_it_ended(run, tokenizer) -> None:
    n = len(run.steps)
    ended = {"stopped": f"Stopped after {n} tokens by a click (the Stop button, or any other click while it ran, "
                        "such as a changed setting): they are kept.",
             "stop_id": f"The model ended its text ({plain(tokenizer.display(run.new_ids[-1]))}) after {n} tokens.",
             "max_new_tokens": f"{n} tokens generated."}[run.stop_reason]
    st.caption(f"{ended} {run.total_seconds:.2f} s in all; the logit lens was read once the tokens were drawn.")
