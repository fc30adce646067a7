"""The model's own answer (Trinh & Le 2018): its next-token probability for each candidate after the
sentence and the completion."""

from __future__ import annotations

import streamlit as st

from app.ui.widgets import plain
from txviz.analysis.coref.answer import read_answer


def model_answer(traced, tokenizer, names: list[str], completion: str) -> None:
    """The model's next-token probability for each candidate after sentence + completion."""
    try:
        answer = read_answer(traced.trace["logits"][0, -1], tokenizer, names)
    except ValueError as error:
        st.warning(f"Cannot read the model's answer: {plain(error)}")
        return
    st.markdown(f"**The model's own answer** after “…{plain(completion)}”: its probability for each candidate's "
                "first token, over the whole vocabulary and renormalized over the candidates.")
    columns = st.columns(len(names))
    best = max(range(len(names)), key=answer.p_candidates.__getitem__)
    for k, column in enumerate(columns):
        column.metric(f"{plain(names[k])} (token “{plain(answer.tokens[k])}”)", f"{answer.p_candidates[k]:.1%} of the candidates",
                      f"{answer.p_vocab[k]:.2%} of the vocabulary", delta_color="off", delta_arrow="off")
    if answer.shared_first_token:
        st.warning("Two candidates start with the same token: their probabilities cannot tell them apart.")
    top = ", ".join(f"“{plain(token)}” {p:.1%}" for token, p in answer.top)
    together = sum(answer.p_vocab)
    doubt = (f" But the candidates together get only {together:.1%} of the next token: this completion does not "
             "make the model name one of them, so read the split with care." if together < 0.5 else "")
    st.caption(f"Between the candidates the model prefers **{plain(names[best])}**.{doubt} Its five likeliest next "
               f"tokens: {top}.")
