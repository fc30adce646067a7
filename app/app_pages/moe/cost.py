"""The "Capacity vs compute" tab: what a MoE keeps in memory against what one token runs through, for
the model shown beside Mistral 7B and Mixtral 8×7B, and as its expert count grows."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.moe.view import MoeView
from app.figures import charts
from txviz.analysis.moe.tables import cost_rows
from txviz.analysis.tradeoffs.formulas import REFERENCES, expert_family


def cost_tab(view: MoeView) -> None:
    st.markdown("All experts sit in memory; a token runs through the router and k of them. FLOPs count two per "
                "multiply-add of the weights a token meets, plus QKᵀ and A·V over the keys it attends.")
    st.latex(r"N_{\text{total}} = N_{\text{attn}} + E\,N_{\text{expert}},\quad N_{\text{active}} = N_{\text{attn}} + "
             r"k\,N_{\text{expert}},\quad \text{FLOPs/token}\approx 2N_{\text{active,matmul}} + 4\,L\,H\,d_{head}\,n")
    own = cache.zoo_model(view.variant).config if view.variant is not None else view.loaded.config
    st.dataframe(cost_rows([own, REFERENCES["mistral-7b"], REFERENCES["mixtral-8x7b"]]), hide_index=True)
    st.caption("FLOPs at half the model's context (the mean number of keys over a full window).")
    family = expert_family(own, context=own.max_seq_len // 2)
    st.plotly_chart(charts.lines([r["experts"] for r in family], {
        "total params": [r["total_params"] for r in family], "active params": [r["active_params"] for r in family],
        "FLOPs/token": [r["flops_per_token"] for r in family]}, log_x=True, log_y=True, mode="lines+markers",
        title=_family_title(own.name, family), x_title="experts E"),
        key="moe_family")


def _family_title(name: str, family: list[dict]) -> str:
    """What each point of the family is: E = 1 is the dense FFN (no router), and a count of experts below
    the model's k routes every token to all of them."""
    k = family[-1]["top_k"]
    fewer = [str(r["experts"]) for r in family if 1 < r["experts"] < k]
    return (f"{name} with E experts of the same width, top-{k} (E = 1: the dense FFN"
            + (f"; E = {', '.join(fewer)}: all of them" if fewer else "") + ")")
