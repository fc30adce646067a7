"""A branch beside the run: the two continuations from the branch's step as token strips, the tokens one
side's text does not have at that point marked, and a caption that says how they compare (read as texts,
app.services.decoding.compare_branch), what the branch reused of the run's cache and what it ran."""

from __future__ import annotations

import streamlit as st

from app.figures import charts
from app.services import decoding
from app.ui.widgets import plain


def draw(view, branched, index: int) -> None:
    """The run's tokens from step ``index`` on beside the branch's, each token the other's text does not
    have at that point marked (only what both sides say something about), the tokens past what was
    compared greyed (the other side was stopped before making their counterparts); what the branch
    reused and what it ran."""
    own, other = view.run.new_ids[index:], branched.new_ids[index:]
    comparison = decoding.compare_branch(own, other, run_cut=view.run.stop_reason == "stopped",
                                         branch_cut=branched.stop_reason == "stopped")
    left, right = st.columns(2, gap="medium")
    for column, name, run, differ, compared, other in (
            (left, "The run", view.run, comparison.run_differ, comparison.run_compared, "branch"),
            (right, "The branch", branched, comparison.branch_differ, comparison.branch_compared, "run")):
        texts = decoding.step_tokens(run)[index:]
        column.markdown(f"**{name}** from step {index}")
        column.markdown(charts.token_strip_html(texts, [False] * len(texts), highlight=set(differ),
                                                greyed=set(range(compared, len(texts))),
                                                titles=strip_titles(index, len(texts), compared, other), first=index),
                        unsafe_allow_html=True)
    saved = decoding.reaching_seconds(view.run, index)
    after = len(branched.steps) - index - 1
    stopped = (" It was stopped by a click (the Stop button, or any other click while it ran, such as a changed "
               "setting); its tokens so far are kept.") if branched.stop_reason == "stopped" else ""
    st.caption(plain(
        f"{how_they_compare(comparison, index, len(own), len(other))} The branch reused the cache of "
        f"{branched.reused_tokens} tokens, which the run spent {saved:.2f} s putting there, and ran only its {after} "
        f"steps after step {index} ({decoding.branch_seconds(branched):.2f} s).{stopped}"))


def strip_titles(index: int, n: int, compared: int, other: str) -> list[str]:
    """Each token's tooltip: its step, and for one past what was compared, why it was not."""
    return [f"step {index + i}" + ("" if i < compared else f" · not compared: the {other} was stopped before it "
                                                            f"made its counterpart") for i in range(n)]


def how_they_compare(comparison, index: int, n_run: int, n_branch: int) -> str:
    """The comparison in words: how long the two read alike after the branch's own step, how much of the
    branch's later text the run has too and whether they end alike, and which tokens were left out
    because the other side was stopped before making their counterparts."""
    said = f"At step {index} the branch took another token."
    if comparison.again is None:
        said += (f" After it the two read the same tokens, step for step, as far as both go (step "
                 f"{index + comparison.run_compared - 1})." if comparison.run_compared > 1 else "")
    elif comparison.branch_compared <= 1:
        said += " The branch ended there (its end-of-text token); the run went on."
    else:
        shared = sum(n for *_, n in comparison.shared)
        alike = (f" After it they read the same tokens up to step {index + comparison.again - 1}, then differ"
                 if comparison.again > 1 else " After it they differ at once")
        said += (f"{alike}; {shared} of the branch's {comparison.branch_compared - 1} later tokens are in the run's "
                 f"text too, in the same order (yellow: the rest, on either side)")
        if comparison.rejoin is not None:
            run_at, branch_at = (index + offset for offset in comparison.rejoin)
            said += (f"; from the branch's step {branch_at} (the run's step {run_at}) on, they read the same "
                     f"tokens as far as both go")
        said += "."
    for side, n, compared, other in (("run", n_run, comparison.run_compared, "branch"),
                                     ("branch", n_branch, comparison.branch_compared, "run")):
        if n > compared:
            first, last = index + compared, index + n - 1
            steps = f"step {first} is" if first == last else f"steps {first}–{last} are"
            said += (f" The {side}'s {steps} not compared: the {other} was stopped before it made "
                     f"{'its counterpart' if first == last else 'their counterparts'}.")
    return said
