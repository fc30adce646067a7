"""Branches: another of the chosen step's candidates, continued from there on the run's cache of every
token before it (only the steps after run), shown beside the run's own continuation (branch_beside).
Kept for this session by (inputs, step, token); one a Stop cut short can be run again (Branch again).

A click on a candidate lands in the step's fragment, but a branch streams outside it: Streamlit lets no
click inside a fragment interrupt that fragment's run, so a Stop there could not stop anything. The click
asks for the branch in session state and reruns the whole page; the page body streams it (``stream_asked``)
with a Stop that keeps the tokens so far, as the run itself does."""

from __future__ import annotations

import time

import streamlit as st

from app.app_pages.decoding import branch_beside, scrubber
from app.figures import charts
from app.services import decoding
from app.ui import state

KEPT_BRANCHES = 16
BRANCHING = state.StoppableRun("decoding_branch", "Ends the branch after the token under way; its tokens so far are kept.")


def clicked(view, step: int, token: int) -> None:
    """A click on a candidate's bar in the step viewer (its handler: before the page draws): that step,
    and a branch from it with that candidate, as a click on its pill below asks."""
    candidates = {c.id for c in view.run.steps[step].candidates if c.id != view.run.steps[step].token.id}
    if token in candidates:
        state.put("dec_step", int(step))
        state.put("_decoding_branch_click", (view.inputs, view.run.new_ids, int(step), int(token)))


def draw(view, index: int) -> None:
    step = view.run.steps[index]
    others = [c for c in step.candidates if c.id != step.token.id]
    if not others or view.run.state is None:
        return
    # the label is escaped Markdown: inside a code span its escapes would show (`\'t`), so it goes in bold
    st.markdown(f"**Branch from step {index}:** continue with another candidate instead of "
                f"**{scrubber.token_label(step.token.text or '')}** (it runs the {view.run.max_new_tokens - index - 1} "
                f"steps after it at most, on the cache).")
    state.follow("dec_branch", (view.inputs, view.run.new_ids, index))
    click = state.pop("_decoding_branch_click", None)
    if click is not None and click[:3] == (view.inputs, view.run.new_ids, index):
        state.put("dec_branch", click[3])  # a candidate's bar clicked in the step viewer
    # the rank keeps labels apart (pills tell options apart by label; two ids may read alike)
    texts = {c.id: f"{scrubber.token_label(c.text or f'#{c.id}')} :gray[#{c.rank} · {c.prob:.2f}]" for c in others}
    token = st.pills("Candidates", list(texts), key="dec_branch", format_func=texts.get, label_visibility="collapsed")
    if token is None:
        return
    key = (view.inputs, view.run.new_ids, index, int(token))
    branched = state.get("_decoding_branches", {}).get(key)
    if branched is None:
        state.put("_decoding_branch_asked", key)
        st.rerun(scope="app")  # the page body streams it, where a Stop can reach it
    branch_beside.draw(view, branched, index)
    if branched.stop_reason == "stopped":  # else a stopped branch stays cut short for the rest of the session
        st.button("Branch again", key="dec_branch_again", on_click=_forget, args=(key,),
                  help="Runs this branch again from its step, to its end (a click stopped it early).")


def _forget(key: tuple) -> None:
    state.put("_decoding_branches", {k: v for k, v in state.get("_decoding_branches", {}).items() if k != key})


def stream_asked(view) -> None:
    """The branch a candidate's click asked for (of this very run), streamed here with a Stop; a branch a
    click stopped a moment ago is kept with the tokens it made."""
    key = state.get("_decoding_branch_asked", None)
    if key is None:
        return
    if key[:2] != (view.inputs, view.run.new_ids):
        state.pop("_decoding_branch_asked")
        return
    with st.spinner("Keeping the tokens of the branch the click stopped…"):
        stopped = BRANCHING.finishing(key)
    if stopped is not None:
        _keep(view, key, stopped)
    elif key not in state.get("_decoding_branches", {}):
        _stream(view, key)
    state.pop("_decoding_branch_asked")


def _stream(view, key: tuple) -> None:
    index, token = key[2], key[3]
    tokens, started = [], time.perf_counter()
    most = view.run.max_new_tokens - index
    with BRANCHING.held(key) as hold:
        title, shown, note = st.empty(), st.empty(), st.empty()
        hold.show(title.markdown, f"**Branching from step {index}** on the cache of the "
                                  f"{view.run.steps[index].position} tokens before it…")

        def on_step(step) -> None:
            tokens.append(step.token.text or f"#{step.token.id}")
            hold.show(shown.markdown, charts.token_strip_html(tokens, [False] * len(tokens)), unsafe_allow_html=True)
            hold.show(note.caption, f"branch token {len(tokens)} of at most {most}, "
                                    f"{time.perf_counter() - started:.1f} s")

        branched = decoding.branch_run(view.loaded, view.run, index, token, on_step=on_step, should_stop=hold.asked)
        hold.keep(branched)  # first: a stopped run's next session-state write may raise (StoppableRun.finishing)
        _keep(view, key, branched)
        for slot in (title, shown, note):
            hold.show(slot.empty)


def _keep(view, key: tuple, branched) -> None:
    kept = {k: v for k, v in state.get("_decoding_branches", {}).items() if k[0] == view.inputs and k != key}
    while len(kept) >= KEPT_BRANCHES:
        kept.pop(next(iter(kept)))
    state.put("_decoding_branches", {**kept, key: branched})
