"""The Detectors tab: previous-token, duplicate-token, first-token sink and induction maps for every head,
and a pattern of your own."""

from __future__ import annotations

import streamlit as st
import torch

from app import cache
from app.figures import charts
from app.services.prompts import PromptError
from app.services.traces import display_tokens, head_metric_grid
from app.ui import state
from app.ui.widgets import plain
from txviz.analysis.heads.detectors import offset_pattern, pattern_scores, token_pattern, unknown_token_ids
from txviz.analysis.heads.metrics import duplicate_pattern, ignored_positions


def detectors_tab(source: str, loaded, traced) -> None:
    tokens = display_tokens(loaded, traced)  # as the token strip shows them: the pattern matches those
    table = cache.get_head_table(source, state.get("prompt"), state.get("bos"))
    a, b = st.columns(2)
    a.plotly_chart(charts.metric_heatmap(head_metric_grid(table, "prev_token"),
                                         title="Previous-token (on your prompt)", zmax=1), key="det_prev")
    _duplicate_token(b, table, traced, loaded.tokenizer, tokens)
    a.plotly_chart(charts.metric_heatmap(head_metric_grid(table, "first_token_mass"),
                                         title="First-token sink (on your prompt)", zmax=1), key="det_sink")
    _induction(b, source, loaded.config)
    _own_pattern(traced, tokens)


def _duplicate_token(column, table, traced, tokenizer, tokens: list[str]) -> None:
    ids, unknown = torch.as_tensor(traced.ids), unknown_token_ids(tokenizer)
    unknown_at = ignored_positions(ids, unknown).nonzero().flatten().tolist()
    n_unknown = len(unknown_at)
    if n_unknown:
        st.caption(f"{n_unknown} of {len(ids)} tokens are the unknown token “{plain(tokens[unknown_at[0]])}”: they are left "
                   "out of duplicate-token and induction (here and in the Attention page's head table), since two "
                   "unknowns are usually two different words, not a repeat.")
    if duplicate_pattern(ids, unknown).any():
        column.plotly_chart(charts.metric_heatmap(head_metric_grid(table, "duplicate_token"),
                                                  title="Duplicate-token (on your prompt)", zmax=1), key="det_dup")
    else:  # the score is a mean over rows with an earlier copy: none here, so every head's is undefined
        column.info(f"Duplicate-token: no token repeats in this prompt{' (unknown tokens aside)' if n_unknown else ''}"
                    ", so there is nothing to score. Add a word "
                    "twice (e.g. “the cat saw the cat”) to see which heads look back at earlier copies.")


def _induction(column, source: str, config) -> None:
    longest = max(1, min(200, (config.max_seq_len - 1) // 2))  # sink + the sequence twice must fit the context
    length = column.number_input("Induction test: random tokens repeated twice, length", min(10, longest), longest,
                                 min(50, longest), key="ind_len")
    try:
        induction = cache.get_induction_scores(source, int(length), 0)
    except PromptError as error:  # over the memory budget
        column.warning(plain(error))
        return
    column.plotly_chart(charts.metric_heatmap(induction, title=f"Induction (random {length}-token sequence, repeated)",
                                              zmax=1), key="det_ind")
    best = divmod(int(induction.argmax()), induction.shape[1])
    column.caption(f"Strongest induction head: layer {best[0]}, head {best[1]} ({induction.max():.2f}).")


def _own_pattern(traced, tokens: list[str]) -> None:
    st.subheader("Your own pattern")
    kind = st.radio("Pattern", ["k tokens back", "a token's text"], horizontal=True, key="pattern_kind")
    if kind == "k tokens back":
        offset = st.number_input("k", 0, max(0, len(tokens) - 1), min(2, len(tokens) - 1), key="pattern_offset")
        pattern = offset_pattern(len(tokens), int(offset))
        label = f"{offset} tokens back"
    else:
        word = st.text_input("Token text (as shown in the token strip, without spaces)", value=".", key="pattern_text",
                             max_chars=100)
        pattern = token_pattern(tokens, word)
        label = f"tokens reading {word!r}"
    if not pattern.any():
        st.info("This pattern matches nothing in the prompt.")
        return
    scores = pattern_scores(traced.trace["attn_probs"][:, 0], pattern).numpy()
    st.plotly_chart(charts.metric_heatmap(scores, title=charts.plotly_text(f"Mass on {label}"), zmax=1), key="det_custom")
