"""The Coreference tab: write a sentence, click the pronoun and its candidates, and see every head ranked
by the attention it sends to the answer, beside the model's own answer."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.heads import builtin_set, causal_note, causal_run, model_answer, ranking
from app.services.prompts import PromptError, about
from app.ui import state
from app.ui.widgets import plain
from txviz.analysis.coref.answer import (default_completion, sentence_words, suggest_candidates,
                                         suggest_deciding_word, suggest_pronoun)
from txviz.analysis.coref.marks import (MAX_CHARS, MAX_WORDS, MIN_WORDS, Marks, check_before_pronoun, check_choice,
                                        mark_key, markable, marks_text, read_marks)


def coref_and_set(source: str, loaded, bos: str) -> None:
    """The Coreference tab: the reader's sentence, then the built-in labeled set."""
    coref_tab(source, loaded, bos)
    builtin_set.builtin_section(source, loaded.config, bos)


def coref_tab(source: str, loaded, bos: str) -> None:
    st.markdown(
        "Which heads connect a pronoun to the noun it stands for? Write a sentence, click the pronoun and the "
        "candidates, and every head is ranked by how much more attention flows from the query token to the "
        "candidate you mark as the answer than to the best other one. A causal model reads left to right: a "
        "token's attention reaches only the words *before* it.")
    st.latex(r"\text{margin}(\text{head}) = \sum_{j\in\text{answer}} A_{qj}"
             r" - \max_{c\neq\text{answer}} \sum_{j\in c} A_{qj}")
    _offer_sidebar_prompt()
    text = st.text_input("Sentence (press Enter)", key="coref_text", max_chars=MAX_CHARS)
    words = sentence_words(text)
    if len(words) < MIN_WORDS:
        st.info("Write a sentence with a pronoun and at least two candidate words before it.")
        return
    try:
        cache.encode(source, text, bos)  # the server's limits, before anything is drawn or run
    except PromptError as error:
        st.warning(plain(about(error, "The sentence")))
        return
    if len(words) > MAX_WORDS:
        st.warning(f"This text has {len(words)} words: marking works on a sentence or two, at most {MAX_WORDS} "
                   "words. Shorten it.")
        return
    marks = _mark_words(text, words)
    if marks is None:
        return
    causal_note.causal_note(source, bos, text, words, marks)
    ranked = ranking.read_rows(source, bos, text, words, marks)
    if ranked is None:
        return
    traced, spans, row = ranked
    names = [words[i].text for i in marks.candidates]
    model_answer.model_answer(traced, loaded.tokenizer, names, marks.completion)
    ranking.rank_heads(loaded, text, traced, spans, names, row, marks.candidates)
    causal_run.causal_section(source, bos, text, words, marks)


def _offer_sidebar_prompt() -> None:
    """The prompt typed in the sidebar, offered as the sentence when it has a pronoun to mark and is not
    the sentence already."""
    prompt = state.get("prompt")
    if prompt == state.get("coref_text") or not markable(prompt):
        return
    left, right = st.columns([4, 1], vertical_alignment="center")
    left.caption(f"Your prompt in the sidebar has a pronoun: “{plain(prompt)}”")
    right.button("Mark it here", key="coref_use_prompt", on_click=state.use_prompt_as, args=("coref_text",))


def _mark_words(text: str, words) -> Marks | None:
    """The strips of clickable words (keyed by the sentence) → the marks, or None when incomplete. They
    open on a link's marks for this sentence, else on the suggested ones, and the link follows them."""
    for key in ("coref_marks", "coref_answer", "coref_completion"):
        state.follow(key, text)  # a link's marks belong to its sentence
    pronoun_default = suggest_pronoun(words)
    candidate_default = suggest_candidates(words, pronoun_default)
    deciding_default = suggest_deciding_word(words, pronoun_default, text)
    suggested = (pronoun_default, sorted(candidate_default), deciding_default)
    linked = read_marks(state.get("coref_marks"), len(words)) or suggested
    label = lambda i: plain(words[i].text)  # noqa: E731
    options = range(len(words))
    pronoun = st.pills("Pronoun: click it", options, default=linked[0], format_func=label,
                       key=mark_key("pronoun", text))
    candidates = st.pills("Candidates it may refer to: click two or more (nouns before it are suggested)", options,
                          selection_mode="multi", default=linked[1], format_func=label,
                          key=mark_key("candidates", text))
    deciding = st.pills("Deciding word: the word that settles the answer (optional)", options,
                        default=linked[2], format_func=label, key=mark_key("deciding", text))
    shown = (pronoun, sorted(candidates), deciding)
    state.put("coref_marks", "" if shown == suggested else marks_text(*shown))
    try:
        candidates = check_choice(pronoun, candidates)
    except ValueError as problem:
        st.info(plain(problem))
        return None
    try:
        check_before_pronoun(words, pronoun, candidates)
    except ValueError as problem:  # nothing is ranked, asked or tested on these marks
        st.warning(f"Cannot rank with these choices: {plain(problem)}")
        return None
    suggested_completion = default_completion(text, words, pronoun_default, candidate_default)
    linked_completion = state.get("coref_completion")
    completion = st.text_input("Completion, appended after the sentence: the model's next word is its answer",
                               value=suggested_completion if linked_completion is None else linked_completion,
                               key=mark_key("completion", text), max_chars=200)
    state.put("coref_completion", None if completion == suggested_completion else completion)
    return Marks(pronoun, tuple(candidates), deciding, completion.rstrip())
