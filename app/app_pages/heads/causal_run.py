"""The "Test it (causal)" section of the Coreference tab: the marked sentence against a
counterfactual the app proposes to flip the answer (the deciding word swapped, big ⇄ small, else the
pronoun's gender, she ⇄ he; only when neither exists the candidates swapped, which says what it tests),
both with the completion, run on a button and kept for every session; the results are drawn by
causal_results.

Why the completion: a causal model cannot let the pronoun see the words after it, so the effect of
"big"/"small" is measured where the model has to name the answer, at the completion's last token.
"""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.heads import causal_results
from app.services.causal import CausalRequest, propose_counterfactual
from app.services.prompts import PromptError
from app.ui import state
from app.ui.widgets import plain
from txviz.analysis.coref.marks import Marks, digest

LAST_RUN = "_causal_last_run"  # this session's last request run: says when the inputs moved on from it
RUN = state.StoppableRun("causal")


def causal_section(source: str, bos: str, text: str, words, marks: Marks) -> None:
    """The pair, the candidates, the estimate and the button; the kept result when there is one."""
    st.subheader("Test it (causal): which heads *move* the answer")
    st.markdown(
        "Attention shows where a head looks, not what it does. Here each head is **intervened on**: its output is "
        "replaced by the one it has on a counterfactual sentence (**patching**) or by its mean over positions "
        "(**ablation**), and the change of the logit difference between the two candidates is measured at the "
        "completion's last token. **Direct logit attribution** (DLA) splits that difference into each head's "
        "share. A causal model cannot let the pronoun see the words after it, which is why the answer is read "
        "at the completion, where the model has to name it.")
    request = _request(bos, text, words, marks)
    if request is None:
        return
    kept = cache.causal_kept(source, request)
    if kept is None:
        kept = _run_button(source, request)
    if kept is not None:
        state.put(LAST_RUN, request)
        causal_results.show(kept, request)


def _request(bos: str, text: str, words, marks: Marks) -> CausalRequest | None:
    """The pair and the candidates from the widgets (keyed by the prompt), or None when unusable."""
    names = [words[i].text for i in marks.candidates]
    clean = text + marks.completion
    deciding = words[marks.deciding].text if marks.deciding is not None else None
    proposed, how = propose_counterfactual(clean, deciding, (names[0], names[1]), words[marks.pronoun].text)
    st.text_input("Sentence + completion (the clean prompt)", value=clean, disabled=True,
                  key=f"causal_clean_{digest(clean)}")
    corrupt = st.text_input(f"Counterfactual (proposed: {plain(how)}; edit it, same token count)", value=proposed,
                            key=f"causal_corrupt_{digest(clean)}", max_chars=400)
    left, right = st.columns(2)
    answer = left.selectbox("Answer: the candidate right for the sentence", names,
                            key=f"causal_answer_{digest(clean, names)}")
    others = [n for n in names if n != answer]
    if not others:
        st.info("The candidates are the same word: mark two different words to compare.")
        return None
    wrong = right.selectbox("Wrong: the candidate it is compared with", others,
                            key=f"causal_wrong_{digest(clean, names, answer)}")
    if not corrupt.strip() or corrupt == clean:
        st.info("Write a counterfactual that differs from the sentence (the same sentence has nothing to patch).")
        return None
    return CausalRequest(clean, corrupt, answer, wrong, tuple(names), words[marks.pronoun].text, bos)


def _run_button(source: str, request: CausalRequest) -> dict | None:
    """The estimate and the button; a run under a progress bar with its own Stop, or None until it is pressed."""
    stopped = RUN.stopped()
    if stopped is not None:
        st.info(f"Stopped after {stopped['seconds']:.0f} s, at {stopped['message']} ({stopped['fraction']:.0%} of "
                "the work). Nothing of it was kept: the report needs every step. Run the test again to measure.")
    try:
        estimate = cache.causal_estimate(source, request)
    except PromptError as error:
        st.warning(plain(error))
        return None
    last = state.get(LAST_RUN, None)
    if last is not None and last != request and last.clean == request.clean:
        st.caption("The inputs changed since the last run: its result is not shown for these. Run the test again.")
    st.caption(f"It takes {estimate.describe()}.")
    if not st.button("Run the causal test", key="causal_run", type="primary"):
        return None
    with RUN.running("Patching and ablating every head", estimate.seconds) as progress:
        return cache.get_causal_report(source, request, progress)
