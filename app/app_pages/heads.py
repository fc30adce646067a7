"""Heads page (seed §1.1, §1.4): detectors for known head types, and the heads that resolve pronouns."""

from __future__ import annotations

import re

import numpy as np
import streamlit as st

from app import charts, resources, sidebar, state
from txviz.analysis.coref import score_heads, word_token_spans
from txviz.analysis.detectors import offset_pattern, pattern_scores, token_pattern

DEFAULT_COREF = "Mary met John at the station, and she gave him a book."
PRONOUNS = {"he", "she", "it", "they", "him", "her", "them", "his", "its", "their"}


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in re.finditer(r"\w+", text)]


def coref_tab(source: str, config, bos: str) -> None:
    st.markdown(
        "Which heads connect a pronoun to the noun it stands for? Write a sentence, pick the pronoun and the "
        "candidates, and every head is ranked by how much more attention flows from the pronoun to the candidate "
        "you mark as the answer than to the best other one. A causal model reads left to right, so only words "
        "*before* the pronoun can receive its attention.")
    st.latex(r"\text{margin}(\text{head}) = \sum_{j\in\text{answer}} A_{pj} - \max_{c\neq\text{answer}} \sum_{j\in c} A_{pj}")
    text = st.text_input("Sentence", value=DEFAULT_COREF, key="coref_text")
    words = _words(text)
    if len(words) < 3:
        st.info("Write a sentence with a pronoun and at least two candidate words before it.")
        return
    labels = [f"{w} (#{i})" for i, (w, _, _) in enumerate(words)]
    pronoun_default = next((i for i, (w, _, _) in enumerate(words) if w.lower() in PRONOUNS), len(words) - 1)
    c1, c2, c3 = st.columns([1, 2, 1])
    pronoun = c1.selectbox("Pronoun", range(len(words)), index=pronoun_default, format_func=labels.__getitem__,
                           key="coref_pronoun")
    before = [i for i in range(pronoun) if words[i][0][:1].isupper() or words[i][0].lower() not in PRONOUNS]
    default_candidates = [i for i in before if words[i][0][:1].isupper()][:2] or before[:2]
    candidates = c2.multiselect("Candidates (two or more)", range(len(words)), default=default_candidates,
                                format_func=labels.__getitem__, key="coref_candidates")
    if len(candidates) < 2:
        st.info("Pick at least two candidate words.")
        return
    target = c3.radio("The answer is", range(len(candidates)), format_func=lambda k: words[candidates[k]][0],
                      key="coref_target")
    try:
        traced = resources.get_trace(source, text, bos)
    except resources.PromptError as error:
        st.warning(str(error))
        return
    try:
        pronoun_row, spans = word_token_spans(traced.offsets, traced.special, words[pronoun][1:],
                                              [words[i][1:] for i in candidates])
        scores = score_heads(traced.trace["attn_probs"][:, 0], pronoun_row, spans, target=int(target))
    except ValueError as error:
        st.warning(f"Cannot rank with these choices: {error}")
        return
    names = [words[i][0] for i in candidates]
    rows = [{"layer": s.layer, "head": s.head, "margin": s.margin,
             "predicts": "tie" if s.predicted is None else names[s.predicted]}
            | {f"→ {name}": m for name, m in zip(names, s.mass)} for s in scores]
    right = sum(r["predicts"] == names[int(target)] for r in rows)
    st.markdown(f"**{right} of {len(rows)} heads** put the most attention from *{words[pronoun][0]}* on "
                f"*{names[int(target)]}*. Best heads first:")
    st.dataframe(rows[:15], hide_index=True, key="coref_ranking")
    grid = np.zeros((config.n_layers, config.n_heads))
    for s in scores:
        grid[s.layer, s.head] = s.margin
    st.plotly_chart(charts.metric_heatmap(grid, title=f"Margin for {names[int(target)]!r}, every head", zmin=None),
                    key="coref_grid")
    tokens = list(traced.tokens)
    columns = st.columns(3)
    for column, s in zip(columns, scores[:3]):
        column.plotly_chart(charts.attention_heatmap(traced.trace.attn(s.layer, s.head).numpy(), tokens, tokens,
                                                     title=f"Layer {s.layer}, head {s.head}"),
                            key=f"coref_map_{s.layer}_{s.head}")

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

st.title("Heads & coreference")
st.markdown(
    "Heads specialize. Some always look one token back, some look at earlier copies of the current token, "
    "some complete patterns (**induction**: after *A B … A*, attend to *B*), many park their attention on "
    "the first token when they have nothing to do. A detector scores each head by the attention mass it "
    "puts on a pattern P, averaged over the rows where P is defined.")
st.latex(r"\mathrm{score}(\text{head}) = \frac{1}{|R|}\sum_{i \in R}\ \sum_{j:\,P_{ij}=1} A_{ij}")

source, loaded, traced = sidebar.prompt_trace()
config = loaded.config
prompt, bos = state.get("prompt"), state.get("bos")
tokens = list(traced.tokens)
table = resources.get_head_table(source, prompt, bos)

tab_detect, tab_coref = st.tabs(["Detectors", "Coreference"])
with tab_detect:
    a, b = st.columns(2)
    a.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "prev_token"),
                                         title="Previous-token (on your prompt)", zmax=1), key="det_prev")
    b.plotly_chart(charts.metric_heatmap(resources.head_metric_grid(table, "duplicate_token"),
                                         title="Duplicate-token (on your prompt)", zmax=1), key="det_dup")
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

with tab_coref:
    coref_tab(source, config, bos)
