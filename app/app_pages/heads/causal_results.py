"""What the causal test found: the two logit differences, how far "looks at the answer" (attention
margin) and "moves the answer" (patching) agree, two layers × heads grids side by side, one sortable
table of every head, and where in the sentence the answer forms (the residual-stream grid)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.figures import causal_charts
from app.ui.widgets import clip_words, plain
from txviz.causal.attribution import correlation_text
from txviz.causal.flip import answer_flip, no_flip_message

GRIDS = {"patching": "Patching effect (from the counterfactual)",
         "margin": "Attention margin at the pronoun (looks at the answer)",
         "dla": "Direct logit attribution", "ablation": "Mean-ablation effect",
         "attribution": "Attribution patching (gradient estimate)"}


def show(report: dict, request) -> None:
    flip = answer_flip(report["clean_logit_diff"], report["corrupt_logit_diff"])
    warning = no_flip_message(flip, request.answer, request.wrong)
    if warning:  # first: everything ranked below is no finding about the answer
        st.warning(f"**Not a finding.** {plain(warning)}", icon=":material/block:")
    _logit_diffs(report, request)
    _agreement(report)
    left, right = st.columns(2)
    for column, default, side in ((left, "margin", "left"), (right, "patching", "right")):
        shown = [k for k in GRIDS if report.get(k) is not None]
        name = column.selectbox("Grid", shown, index=shown.index(default) if default in shown else 0,
                                format_func=GRIDS.get, key=f"causal_grid_{side}")
        unit = "margin" if name == "margin" else "Δ logit diff" if name != "dla" else "logit diff share"
        column.plotly_chart(causal_charts.effect_grid(report[name], title=GRIDS[name], unit=unit),
                            key=f"causal_chart_{side}")
    table = head_table(report)
    st.markdown("**Every head**, sorted by the size of its patching effect (click a column to sort by it):")
    st.dataframe(table, hide_index=True, key="causal_table", height=320)
    top = ", ".join(f"{plain(row.head_name)} ({row.patching:+.3f})" for row in table.head(10).itertuples())
    if warning:
        st.caption(f"Largest patching effects (they move the logit difference; the answer does not flip): {top}.")
    else:
        st.caption(f"Top heads by patching: {top}.")
    st.plotly_chart(causal_charts.residual_patching(report["residual_grid"], report["clean_tokens"]),
                    key="causal_residual")
    st.caption("Each cell: the clean run with the residual stream entering that layer at that token taken from the "
               "counterfactual. Only the tokens where the two prompts differ can carry the swap: expect its effect "
               "in their columns in early layers and at the last token in later ones.")


def _logit_diffs(report: dict, request) -> None:
    a, w = report["answer_token"]["text"], report["wrong_token"]["text"]
    first, second = st.columns(2)
    first.metric(f"Logit difference “{plain(a)}” − “{plain(w)}”, sentence", f"{report['clean_logit_diff']:+.3f}")
    second.metric("…on the counterfactual", f"{report['corrupt_logit_diff']:+.3f}")
    prefers = lambda diff: plain(request.answer if diff > 0 else request.wrong)  # noqa: E731
    st.caption(f"Measured at the last token of “{plain(clip_words(request.clean, 40, keep='end'))}” and of "
               f"“{plain(clip_words(request.corrupt, 40, keep='end'))}”, "
               f"each word by its first token (“{plain(a)}”, “{plain(w)}”); positive means {plain(request.answer)} is preferred. "
               f"The model prefers **{prefers(report['clean_logit_diff'])}** on the sentence and "
               f"**{prefers(report['corrupt_logit_diff'])}** on the counterfactual.")


def _figure(agreement: dict | None) -> str:
    if agreement is None:
        return "not available"
    rho = correlation_text(agreement["spearman"])
    overlap = round(agreement["top_k_overlap"] * agreement["k"])
    return f"rank correlation (Spearman) {rho}, top-{agreement['k']} overlap {overlap}/{agreement['k']}"


def _agreement(report: dict) -> None:
    st.markdown(f"**Looks at the answer vs moves the answer** (attention margin against patching, every head): "
                f"{_figure(report['margin_patching_agreement'])}.  \n"
                f"**Attribution patching vs exact patching**: {_figure(report['attribution_agreement'])}.")
    if report["margin_patching_agreement"] is None:
        st.caption("No attention margin: the pronoun or a candidate is not a whole word of the sentence.")
    else:
        st.caption("The attention margin is read at the pronoun's row (the ranking above, read at the pronoun): "
                   "there a causal model has read only the words up to the pronoun, so the margin cannot depend on "
                   "anything said after it.")


def head_table(report: dict) -> pd.DataFrame:
    """One row per head, sorted by |patching effect|, with each measure's rank."""
    n_layers, n_heads = report["patching"].shape
    rows = {"head_name": [f"L{layer} H{head}" for layer in range(n_layers) for head in range(n_heads)],
            "layer": [layer for layer in range(n_layers) for _ in range(n_heads)],
            "head": [head for _ in range(n_layers) for head in range(n_heads)]}
    for name in ("patching", "attribution", "ablation", "dla", "margin"):
        if report.get(name) is not None:
            rows[name] = report[name].ravel()
    table = pd.DataFrame(rows)
    table["patching rank"] = table["patching"].abs().rank(ascending=False, method="min").astype(int)
    if "margin" in table:
        table["margin rank"] = table["margin"].rank(ascending=False, method="min").astype(int)
    return table.sort_values("patching rank", kind="stable").reset_index(drop=True)
