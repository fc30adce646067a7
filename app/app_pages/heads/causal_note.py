"""Why the pronoun's attention row cannot carry the answer (a causal model reads left to right), measured
on the other sentence of a Winograd pair (Levesque et al. 2012)."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.services.prompts import PromptError
from app.ui.widgets import plain
from txviz.analysis.coref.ranking import word_token_spans
from txviz.analysis.coref.answer import CONTRASTS, contrast_sentence, max_row_difference
from txviz.analysis.coref.marks import Marks, mark_key, same_prefix


def causal_note(source: str, bos: str, text: str, words, marks: Marks) -> None:
    """Say why the pronoun's row cannot carry the answer, and measure it on the other sentence of the pair."""
    pronoun = words[marks.pronoun]
    if not marks.decided_after_pronoun:
        st.caption(f"At “{plain(pronoun.text)}” the model has read only “{plain(text[:pronoun.end])}”: agreement (gender, "
                   "number) can decide there, but nothing said after the pronoun can. Mark a deciding word after "
                   "it to read attention from there.")
        return
    word = words[marks.deciding]
    st.info(f"**At “{plain(pronoun.text)}” no head can know the answer.** “{plain(pronoun.text)}” comes before "
            f"“{plain(word.text)}”, and a causal model reads left to right: its row at “{plain(pronoun.text)}” sees only "
            f"“{plain(text[:pronoun.end])}”. Every head's attention there is the same whatever the sentence says after "
            f"it, so a ranking read at the pronoun cannot reflect “{plain(word.text)}”. Read from the deciding word or "
            "the completion's end instead, and ask the model itself (below).")
    swap = st.text_input(f"Check it: replace “{plain(word.text)}” with", value=CONTRASTS.get(word.text.lower(), ""),
                         key=mark_key("swap", text, marks.deciding), max_chars=40).strip()
    if swap:
        _measure_swap(source, bos, text, pronoun, word, swap)


def _measure_swap(source: str, bos: str, text: str, pronoun, word, swap: str) -> None:
    """The largest change of any head's attention at the pronoun when ``word`` becomes ``swap``."""
    try:
        a, b = (cache.get_trace(source, t, bos) for t in (text, contrast_sentence(text, word, swap)))
        row, _ = word_token_spans(a.offsets, a.special, (pronoun.start, pronoun.end), [])
    except (PromptError, ValueError) as error:
        st.warning(f"Cannot compare: {plain(error)}")
        return
    if not same_prefix(a.ids, b.ids, row):
        st.caption("The two sentences differ before the pronoun's token: nothing to compare.")
        return
    delta = max_row_difference(a.trace["attn_probs"][:, 0], b.trace["attn_probs"][:, 0], row)
    heads = a.trace["attn_probs"].shape[0] * a.trace["attn_probs"].shape[2]
    tail = text[word.end:]
    st.caption(f"Measured: “…{plain(swap + tail)}” against “…{plain(word.text + tail)}”, the largest difference of any of "
               f"the {heads} heads' attention at “{plain(pronoun.text)}” is {delta:.3g}.")
