"""Heads page (seed §1.1, §1.4): detectors for known head types, and the heads that resolve pronouns."""

from __future__ import annotations

import hashlib

import numpy as np
import streamlit as st
import torch

from app import resources
from app.figures import charts
from app.ui import sidebar, state
from txviz.analysis.coref import score_heads, word_token_spans
from txviz.analysis.coref_answer import (CONTRASTS, QUERY_KINDS, contrast_sentence, default_completion,
                                         max_row_difference, query_row, read_answer, sentence_words,
                                         suggest_candidates, suggest_deciding_word, suggest_pronoun)
from txviz.analysis.detectors import offset_pattern, pattern_scores, token_pattern, unknown_token_ids
from txviz.analysis.heads import duplicate_pattern, ignored_positions

TABS = ("Detectors", "Coreference")
DETECTOR_WIDGETS = ("ind_len", "pattern_")  # key prefixes of each tab's widgets
COREF_WIDGETS = tuple(f"coref_{name}_" for name in ("pronoun", "candidates", "deciding", "completion", "swap",
                                                     "query", "target"))
MAX_WORDS = 60  # three strips of clickable words: beyond this they stop being readable
QUERY_LABELS = {"pronoun": "the pronoun", "deciding word": "the deciding word",
                "completion end": "the completion's end"}


def _digest(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def _coref_key(name: str, text: str, *inputs) -> str:
    """``coref_<name>_<hash of the sentence>[_<hash of the other inputs>]``: a widget keyed by what its
    options and default come from, so a new sentence (or new marks) gets fresh widgets."""
    return f"coref_{name}_{_digest(text)}" + (f"_{_digest(*inputs)}" if inputs else "")


def _mark_words(text: str, words) -> dict | None:
    """The strips of clickable words (keyed by the sentence) → the marks, or None when incomplete."""
    pronoun_default = suggest_pronoun(words)
    candidate_default = suggest_candidates(words, pronoun_default)
    label = lambda i: words[i].text  # noqa: E731
    options = range(len(words))
    pronoun = st.pills("Pronoun: click it", options, default=pronoun_default, format_func=label,
                       key=_coref_key("pronoun", text))
    candidates = st.pills("Candidates it may refer to: click two or more (nouns before it are suggested)", options,
                          selection_mode="multi", default=candidate_default, format_func=label,
                          key=_coref_key("candidates", text))
    deciding = st.pills("Deciding word: the word that settles the answer (optional)", options,
                        default=suggest_deciding_word(words, pronoun_default), format_func=label,
                        key=_coref_key("deciding", text))
    if pronoun is None:
        st.info("Click the pronoun in the first strip.")
        return None
    candidates = sorted(candidates)
    if len(candidates) < 2 or pronoun in candidates:
        st.info("Click at least two candidate words, other than the pronoun.")
        return None
    completion = st.text_input("Completion, appended after the sentence: the model's next word is its answer",
                               value=default_completion(text, words, pronoun_default, candidate_default),
                               key=_coref_key("completion", text), max_chars=200)
    return {"pronoun": pronoun, "candidates": candidates, "deciding": deciding, "completion": completion.rstrip()}


def _causal_note(source: str, bos: str, text: str, words, marks: dict) -> None:
    """Say why the pronoun's row cannot carry the answer, and measure it on the other sentence of the pair."""
    pronoun, deciding = words[marks["pronoun"]], marks["deciding"]
    if deciding is None or deciding <= marks["pronoun"]:
        st.caption(f"At “{pronoun.text}” the model has read only “{text[:pronoun.end]}”: agreement (gender, "
                   "number) can decide there, but nothing said after the pronoun can. Mark a deciding word after "
                   "it to read attention from there.")
        return
    word = words[deciding]
    st.info(f"**At “{pronoun.text}” no head can know the answer.** “{pronoun.text}” comes before "
            f"“{word.text}”, and a causal model reads left to right: its row at “{pronoun.text}” sees only "
            f"“{text[:pronoun.end]}”. Every head's attention there is the same whatever the sentence says after "
            f"it, so a ranking read at the pronoun cannot reflect “{word.text}”. Read from the deciding word or "
            "the completion's end instead, and ask the model itself (below).")
    swap = st.text_input(f"Check it: replace “{word.text}” with", value=CONTRASTS.get(word.text.lower(), ""),
                         key=_coref_key("swap", text, deciding), max_chars=40).strip()
    if not swap:
        return
    try:
        a, b = (resources.get_trace(source, t, bos) for t in (text, contrast_sentence(text, word, swap)))
        row, _ = word_token_spans(a.offsets, a.special, (pronoun.start, pronoun.end), [])
    except (resources.PromptError, ValueError) as error:
        st.warning(f"Cannot compare: {error}")
        return
    if a.ids[:row + 1] != b.ids[:row + 1]:
        st.caption("The two sentences differ before the pronoun's token: nothing to compare.")
        return
    delta = max_row_difference(a.trace["attn_probs"][:, 0], b.trace["attn_probs"][:, 0], row)
    heads = a.trace["attn_probs"].shape[0] * a.trace["attn_probs"].shape[2]
    tail = text[word.end:]
    st.caption(f"Measured: “…{swap}{tail}” against “…{word.text}{tail}”, the largest difference of any of the "
               f"{heads} heads' attention at “{pronoun.text}” is {delta:.3g}.")


def _model_answer(traced, tokenizer, names: list[str], completion: str) -> None:
    """The model's next-token probability for each candidate after sentence + completion."""
    try:
        answer = read_answer(traced.trace["logits"][0, -1], tokenizer, names)
    except ValueError as error:
        st.warning(f"Cannot read the model's answer: {error}")
        return
    st.markdown(f"**The model's own answer** after “…{completion}”: its probability for each candidate's "
                "first token, over the whole vocabulary and renormalized over the candidates.")
    columns = st.columns(len(names))
    best = max(range(len(names)), key=answer.p_candidates.__getitem__)
    for k, column in enumerate(columns):
        column.metric(f"{names[k]} (token “{answer.tokens[k]}”)", f"{answer.p_candidates[k]:.1%} of the candidates",
                      f"{answer.p_vocab[k]:.2%} of the vocabulary", delta_color="off", delta_arrow="off")
    if answer.shared_first_token:
        st.warning("Two candidates start with the same token: their probabilities cannot tell them apart.")
    top = ", ".join(f"“{token}” {p:.1%}" for token, p in answer.top)
    together = sum(answer.p_vocab)
    doubt = (f" But the candidates together get only {together:.1%} of the next token: this completion does not "
             "make the model name one of them, so read the split with care." if together < 0.5 else "")
    st.caption(f"Between the candidates the model prefers **{names[best]}**.{doubt} Its five likeliest next "
               f"tokens: {top}.")


def _rank(source: str, bos: str, text: str, words, marks: dict):
    """The cached trace of sentence + completion (one model run per sentence and completion); the ranking
    is recomputed from it for each set of marks, which costs milliseconds."""
    full = text + marks["completion"]
    try:
        traced = resources.get_trace(source, full, bos, capture=("attn_probs", "logits"))
    except resources.PromptError as error:
        st.warning(str(error))
        return None
    st.caption(f"The model ran once on these {traced.n_tokens} tokens ({traced.seconds:.2f} s), kept for this sentence "
               "and completion: marking other words only re-reads its attention.")
    kinds = [k for k in QUERY_KINDS if k != "deciding word" or marks["deciding"] is not None]
    kind = st.radio("Read attention from", kinds, format_func=QUERY_LABELS.get, horizontal=True,
                    key=_coref_key("query", text, marks["deciding"] is None))
    pronoun, deciding = words[marks["pronoun"]], marks["deciding"]
    try:
        _, spans = word_token_spans(traced.offsets, traced.special, (pronoun.start, pronoun.end),
                                    [(words[i].start, words[i].end) for i in marks["candidates"]])
        row = query_row(kind, traced.offsets, traced.special, pronoun=(pronoun.start, pronoun.end),
                        deciding=None if deciding is None else (words[deciding].start, words[deciding].end))
    except ValueError as error:
        st.warning(f"Cannot rank with these choices: {error}")
        return None
    return traced, spans, row


def coref_tab(source: str, config, bos: str, tokenizer) -> None:
    st.markdown(
        "Which heads connect a pronoun to the noun it stands for? Write a sentence, click the pronoun and the "
        "candidates, and every head is ranked by how much more attention flows from the query token to the "
        "candidate you mark as the answer than to the best other one. A causal model reads left to right: a "
        "token's attention reaches only the words *before* it.")
    st.latex(r"\text{margin}(\text{head}) = \sum_{j\in\text{answer}} A_{qj}"
             r" - \max_{c\neq\text{answer}} \sum_{j\in c} A_{qj}")
    text = st.text_input("Sentence (press Enter)", key="coref_text", max_chars=300)
    words = sentence_words(text)
    if len(words) < 3:
        st.info("Write a sentence with a pronoun and at least two candidate words before it.")
        return
    try:
        resources.encode(source, text, bos)  # the server's limits, before anything is drawn or run
    except resources.PromptError as error:
        st.warning(str(error))
        return
    if len(words) > MAX_WORDS:
        st.warning(f"This text has {len(words)} words: marking works on a sentence or two, at most {MAX_WORDS} "
                   "words. Shorten it.")
        return
    marks = _mark_words(text, words)
    if marks is None:
        return
    _causal_note(source, bos, text, words, marks)
    ranked = _rank(source, bos, text, words, marks)
    if ranked is None:
        return
    traced, spans, row = ranked
    names = [words[i].text for i in marks["candidates"]]
    _model_answer(traced, tokenizer, names, marks["completion"])
    target = st.radio("Rank the heads for the answer", range(len(names)), format_func=names.__getitem__,
                      horizontal=True, key=_coref_key("target", text, names))
    try:
        scores = score_heads(traced.trace["attn_probs"][:, 0], row, spans, target=int(target))
    except ValueError as error:
        st.warning(f"Cannot rank with these choices: {error}")
        return
    _show_ranking(config, traced, scores, names, int(target), row)


def _show_ranking(config, traced, scores, names: list[str], target: int, row: int) -> None:
    rows = [{"layer": s.layer, "head": s.head, "margin": s.margin,
             "predicts": "tie" if s.predicted is None else names[s.predicted]}
            | {f"→ {name}": m for name, m in zip(names, s.mass)} for s in scores]
    right = sum(r["predicts"] == names[target] for r in rows)
    tokens = resources.display_tokens(loaded, traced)  # labels: split characters shown whole
    query = tokens[row].strip() or tokens[row]
    st.markdown(f"**{right} of {len(rows)} heads** put the most attention from *{query}* (token #{row}) on "
                f"*{names[target]}*. Best heads first:")
    st.dataframe(rows[:15], hide_index=True, key="coref_ranking")
    grid = np.zeros((config.n_layers, config.n_heads))
    for s in scores:
        grid[s.layer, s.head] = s.margin
    st.plotly_chart(charts.metric_heatmap(grid, title=f"Margin for {names[target]!r} from {query!r}, every head",
                                          zmin=None), key="coref_grid")
    columns = st.columns(3)
    for column, s in zip(columns, scores[:3]):
        figure = charts.attention_heatmap(traced.trace.attn(s.layer, s.head).numpy(), tokens, tokens,
                                          title=f"Layer {s.layer}, head {s.head} (boxed: the query row)")
        figure.add_hrect(y0=row - 0.5, y1=row + 0.5, line=dict(color="crimson", width=2))  # categorical y: index
        column.plotly_chart(figure, key=f"coref_map_{s.layer}_{s.head}")


def builtin_section(source: str, config, bos: str) -> None:
    st.subheader("Scored on the built-in labeled set")
    st.markdown("240 sentences written for txviz (gender, number, animacy), balanced so that always picking the "
                "nearest candidate, or the first, scores exactly 50%. A head is right when the answer gets more "
                "attention from the pronoun than any other candidate (Clark et al. 2019).")
    if st.button("Score every head on the built-in set", key="coref_builtin"):
        st.session_state["coref_builtin_done"] = True
    if st.session_state.get("coref_builtin_done"):
        try:
            result = resources.get_coref_evaluation(source, bos)
        except ValueError as error:  # e.g. a BOS policy this model's tokenizer has no token for
            st.warning(f"Cannot score the built-in set: {error}")
            return
        m1, m2, m3 = st.columns(3)
        best = result["heads"][0]
        m1.metric("Best head", f"L{best['layer']} H{best['head']}", f"accuracy {best['accuracy']:.1%}",
                  delta_color="off")
        m2.metric("Nearest-candidate baseline", f"{result['baselines']['nearest']:.1%}")
        m3.metric("First-candidate baseline", f"{result['baselines']['first']:.1%}")
        accuracy = np.zeros((config.n_layers, config.n_heads))
        for row in result["heads"]:
            accuracy[row["layer"], row["head"]] = row["accuracy"]
        st.plotly_chart(charts.metric_heatmap(accuracy, title=f"Accuracy on {result['n_cases']} cases", zmax=1),
                        key="coref_accuracy")
        st.dataframe(result["heads"][:10], hide_index=True, key="coref_builtin_table")


def detectors_tab(source: str, config, traced, loaded) -> None:
    tokens = resources.display_tokens(loaded, traced)  # as the token strip shows them: the pattern matches those
    table = resources.get_head_table(source, state.get("prompt"), state.get("bos"))
    a, b = st.columns(2)
    a.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "prev_token"),
                                         title="Previous-token (on your prompt)", zmax=1), key="det_prev")
    ids, unknown = torch.as_tensor(traced.ids), unknown_token_ids(loaded.tokenizer)
    unknown_at = ignored_positions(ids, unknown).nonzero().flatten().tolist()
    n_unknown = len(unknown_at)
    if n_unknown:
        st.caption(f"{n_unknown} of {len(ids)} tokens are the unknown token `{tokens[unknown_at[0]]}`: they are left "
                   "out of duplicate-token and induction (here and in the Attention page's head table), since two "
                   "unknowns are usually two different words, not a repeat.")
    if duplicate_pattern(ids, unknown).any():
        b.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "duplicate_token"),
                                             title="Duplicate-token (on your prompt)", zmax=1), key="det_dup")
    else:  # the score is a mean over rows with an earlier copy: none here, so every head's is undefined
        b.info(f"Duplicate-token: no token repeats in this prompt{' (unknown tokens aside)' if n_unknown else ''}, "
               "so there is nothing to score. Add a word "
               "twice (e.g. “the cat saw the cat”) to see which heads look back at earlier copies.")
    a.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "first_token_mass"),
                                         title="First-token sink (on your prompt)", zmax=1), key="det_sink")
    longest = max(1, min(200, (config.max_seq_len - 1) // 2))  # sink + the sequence twice must fit the context
    length = b.number_input("Induction test: random tokens repeated twice, length", min(10, longest), longest,
                            min(50, longest), key="ind_len")
    try:
        induction = resources.get_induction_scores(source, int(length), 0)
    except resources.PromptError as error:  # over the memory budget
        b.warning(str(error))
        induction = None
    if induction is not None:
        b.plotly_chart(charts.metric_heatmap(induction, title=f"Induction (random {length}-token sequence, repeated)",
                                             zmax=1), key="det_ind")
        best = divmod(int(induction.argmax()), induction.shape[1])
        b.caption(f"Strongest induction head: layer {best[0]}, head {best[1]} ({induction.max():.2f}).")

    st.subheader("Your own pattern")
    kind = st.radio("Pattern", ["k tokens back", "a token's text"], horizontal=True, key="pattern_kind")
    if kind == "k tokens back":
        offset = st.number_input("k", 0, max(0, len(tokens) - 1), min(2, len(tokens) - 1), key="pattern_offset")
        pattern = offset_pattern(len(tokens), int(offset))
        label = f"{offset} tokens back"
    else:
        word = st.text_input("Token text (as shown in the token strip, without spaces)", value=".", key="pattern_text")
        pattern = token_pattern(tokens, word)
        label = f"tokens reading {word!r}"
    if not pattern.any():
        st.info("This pattern matches nothing in the prompt.")
    else:
        scores = pattern_scores(traced.trace["attn_probs"][:, 0], pattern).numpy()
        st.plotly_chart(charts.metric_heatmap(scores, title=f"Mass on {label}", zmax=1), key="det_custom")


def keep_widgets_alive(text: str) -> None:
    """A closed tab's widgets are not drawn, and Streamlit would forget their values: keep them, so that
    reopening the tab shows them again. The marks of an earlier sentence are dropped."""
    sentence = _digest(text)
    for key in list(st.session_state):
        if not isinstance(key, str):
            continue
        if key.startswith(DETECTOR_WIDGETS) or (key.startswith(COREF_WIDGETS) and key.split("_")[2] == sentence):
            st.session_state[key] = st.session_state[key]
        elif key.startswith(COREF_WIDGETS):
            del st.session_state[key]


st.title("Heads & coreference")
st.markdown(
    "Heads specialize. Some always look one token back, some look at earlier copies of the current token, "
    "some complete patterns (**induction**: after *A B … A*, attend to *B*), many park their attention on "
    "the first token when they have nothing to do. A detector scores each head by the attention mass it "
    "puts on a pattern P, averaged over the rows where P is defined.")
st.latex(r"\mathrm{score}(\text{head}) = \frac{1}{|R|}\sum_{i \in R}\ \sum_{j:\,P_{ij}=1} A_{ij}")

source, loaded, traced = sidebar.prompt_trace()
config = loaded.config
bos = state.get("bos")

keep_widgets_alive(state.get("coref_text"))
if "heads_tab" not in st.session_state and state.get("coref_text") != state.DEFAULT_COREF:
    st.session_state["heads_tab"] = "Coreference"  # a link that carries a sentence opens on it
st.caption("Only the open tab is computed.")
tabs = dict(zip(TABS, st.tabs(list(TABS), key="heads_tab", on_change="rerun")))
with tabs["Detectors"]:
    if tabs["Detectors"].open is not False:  # None: state tracking off (never here)
        detectors_tab(source, config, traced, loaded)
with tabs["Coreference"]:
    if tabs["Coreference"].open is not False:
        coref_tab(source, config, bos, loaded.tokenizer)
        builtin_section(source, config, bos)
