"""Every head ranked for one marked sentence: where attention is read from, the table of the best heads,
the margin of every head, and the maps of the top three."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import causal_charts, charts
from app.services.prompts import PromptError, about
from app.services.traces import display_tokens
from app.ui import state
from app.ui.widgets import plain
from txviz.analysis.coref.ranking import score_heads, word_token_spans
from txviz.analysis.coref.answer import query_row
from txviz.analysis.coref.marks import Marks, mark_key
from txviz.analysis.coref.table import count_predicting, head_grid, ranking_rows

QUERY_LABELS = {"pronoun": "the pronoun", "deciding word": "the deciding word",
                "completion end": "the completion's end"}


def read_rows(source: str, bos: str, text: str, words, marks: Marks):
    """The cached trace of sentence + completion (one model run per sentence and completion), the
    candidates' token spans and the query row; the ranking is recomputed from it for each set of marks,
    which costs milliseconds. None (with a warning) when it cannot be read."""
    try:
        traced = cache.get_trace(source, text + marks.completion, bos, capture=("attn_probs", "logits"))
    except PromptError as error:
        st.warning(plain(about(error, "The sentence with its completion")))
        return None
    st.caption(f"The model ran once on these {traced.n_tokens} tokens ({traced.seconds:.2f} s), kept for this sentence "
               "and completion: marking other words only re-reads its attention.")
    kind = st.radio("Read attention from", marks.query_kinds(), format_func=QUERY_LABELS.get, horizontal=True,
                    key=mark_key("query", text, marks.deciding is None))
    pronoun, deciding = words[marks.pronoun], marks.deciding
    try:
        _, spans = word_token_spans(traced.offsets, traced.special, (pronoun.start, pronoun.end),
                                    [(words[i].start, words[i].end) for i in marks.candidates])
        row = query_row(kind, traced.offsets, traced.special, pronoun=(pronoun.start, pronoun.end),
                        deciding=None if deciding is None else (words[deciding].start, words[deciding].end))
    except ValueError as error:
        st.warning(f"Cannot rank with these choices: {plain(error)}")
        return None
    return traced, spans, row


def rank_heads(loaded, text: str, traced, spans, names: list[str], row: int, candidates: tuple[int, ...]) -> None:
    """The answer to rank for (a link's, by the candidate's word index, else the first), then every
    head's margin for it."""
    linked = state.get("coref_answer")
    target = st.radio("Rank the heads for the answer", range(len(names)), format_func=lambda k: plain(names[k]),
                      index=candidates.index(linked) if linked in candidates else 0,
                      horizontal=True, key=mark_key("target", text, names))
    state.put("coref_answer", -1 if int(target) == 0 else candidates[int(target)])
    try:
        scores = score_heads(traced.trace["attn_probs"][:, 0], row, spans, target=int(target))
    except ValueError as error:
        st.warning(f"Cannot rank with these choices: {plain(error)}")
        return
    _show_ranking(loaded, traced, scores, names, int(target), row)


def _show_ranking(loaded, traced, scores, names: list[str], target: int, row: int) -> None:
    rows = ranking_rows(scores, names)
    tokens = display_tokens(loaded, traced)  # labels: split characters shown whole
    query = tokens[row].strip() or tokens[row]
    st.markdown(f"**{count_predicting(rows, names[target])} of {len(rows)} heads** put the most attention from "
                f"*{plain(query)}* (token #{row}) on *{plain(names[target])}*. Best heads first:")
    st.dataframe(rows[:15], hide_index=True, key="coref_ranking")
    grid = head_grid(((s.layer, s.head, s.margin) for s in scores), loaded.config.n_layers, loaded.config.n_heads)
    st.plotly_chart(causal_charts.effect_grid(grid, title=charts.plotly_text(f"Margin for {names[target]!r} from {query!r}, every head"),
                                              unit="margin"), key="coref_grid")  # signed: zero is white
    columns = st.columns(3)
    for column, s in zip(columns, scores[:3]):
        figure = charts.attention_heatmap(traced.trace.attn(s.layer, s.head).numpy(), tokens, tokens,
                                          title=f"Layer {s.layer}, head {s.head} (boxed: the query row)")
        figure.add_hrect(y0=row - 0.5, y1=row + 0.5, line=dict(color="crimson", width=2))  # categorical y: index
        column.plotly_chart(figure, key=f"coref_map_{s.layer}_{s.head}")
