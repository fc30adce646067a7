"""Branches: another of the chosen step's candidates, continued from there on the run's cache of every
token before it (only the steps after run, streamed like the run itself), shown beside the run's own
continuation with the tokens where the two differ marked. Kept for this session by (inputs, step, token).

A branch has no Stop: it runs inside the step fragment, and Streamlit lets no click inside a fragment
interrupt that fragment's run (the click waits for it), so a Stop there could not stop anything. It runs
at most the run's own number of steps."""

from __future__ import annotations

import streamlit as st

from app.app_pages.decoding import scrubber
from app.figures import charts
from app.services import decoding
from app.ui import state
from app.ui.widgets import plain

KEPT_BRANCHES = 16


def draw(view, index: int) -> None:
    step = view.run.steps[index]
    others = [c for c in step.candidates if c.id != step.token.id]
    if not others or view.run.state is None:
        return
    st.markdown(f"**Branch from step {index}:** continue with another candidate instead of "
                f"`{scrubber.token_label(step.token.text or '')}` (it runs the {view.run.max_new_tokens - index - 1} "
                f"steps after it at most, on the cache).")
    state.follow("dec_branch", (view.inputs, view.run.new_ids, index))
    # the rank keeps labels apart (pills tell options apart by label; two ids may read alike)
    texts = {c.id: f"{scrubber.token_label(c.text or f'#{c.id}')} :gray[#{c.rank} · {c.prob:.2f}]" for c in others}
    token = st.pills("Candidates", list(texts), key="dec_branch", format_func=texts.get, label_visibility="collapsed")
    if token is None:
        return
    key = (view.inputs, view.run.new_ids, index, int(token))
    branched = state.get("_decoding_branches", {}).get(key) or _stream(view, index, int(token), key)
    side_by_side(view, branched, index)


def _stream(view, index: int, token: int, key: tuple):
    tokens, shown = [], st.empty()

    def on_step(step) -> None:
        tokens.append(step.token.text or f"#{step.token.id}")
        shown.markdown(charts.token_strip_html(tokens, [False] * len(tokens)), unsafe_allow_html=True)

    branched = decoding.branch_run(view.loaded, view.run, index, token, on_step=on_step)
    kept = {k: v for k, v in state.get("_decoding_branches", {}).items() if k[0] == view.inputs}
    while len(kept) >= KEPT_BRANCHES:
        kept.pop(next(iter(kept)))
    state.put("_decoding_branches", {**kept, key: branched})
    shown.empty()
    return branched


def side_by_side(view, branched, index: int) -> None:
    """The run's tokens from step ``index`` on beside the branch's, each token that differs from the
    other's at the same step marked; what the branch reused and what it ran."""
    own, other = view.run.new_ids[index:], branched.new_ids[index:]
    first = decoding.first_difference(own, other)
    differ = {i for i in range(max(len(own), len(other)))
              if i >= len(own) or i >= len(other) or own[i] != other[i]}
    left, right = st.columns(2, gap="medium")
    for column, name, run in ((left, "The run", view.run), (right, "The branch", branched)):
        texts = decoding.step_tokens(run)[index:]
        column.markdown(f"**{name}** from step {index}")
        column.markdown(charts.token_strip_html(texts, [False] * len(texts), highlight=differ & set(range(len(texts))),
                                                titles=[f"step {index + i}" for i in range(len(texts))]),
                        unsafe_allow_html=True)
    same = len(set(range(min(len(own), len(other)))) - differ)
    saved = decoding.reaching_seconds(view.run, index)
    st.caption(plain(
        f"They differ first at step {index + (first or 0)}; {same} of the steps after agree token for token "
        f"(yellow: differ). The branch reused the cache of {branched.reused_tokens} tokens, which the run spent "
        f"{saved:.2f} s putting there, and ran only its {len(branched.steps) - 1} steps after step {index} "
        f"({branched.total_seconds:.2f} s)."))
