"""Mixture of Experts page: where the router sends each token, how evenly, what the
balancing loss changes, and what the experts cost — on the loaded model if it is a MoE, else on the
lab zoo's MoE variants. Each tab is drawn by one module of this folder."""

from __future__ import annotations

from functools import partial

import streamlit as st

from app.app_pages.moe import balance, cost, routing
from app.app_pages.moe.view import MoeView
from app.ui import sidebar, state

TABS = {"Routing on a text": routing.routing_tab, "Balanced vs unbalanced": balance.balance_tab,
        "Capacity vs compute": cost.cost_tab}

st.title("Mixture of Experts")
st.markdown(
    "A dense model sends every token through the same feed-forward network. A **Mixture of Experts** "
    "keeps several FFNs side by side and a small linear **router** that scores them for each token; only "
    "the k best-scoring experts run, and their outputs are mixed by the router's weights. Memory holds "
    "every expert, but a token pays for k of them: more capacity at the same compute per token. The catch "
    "is balance: left alone, a router tends to favour the experts that are already good, they get more "
    "gradient and improve further, and the rest go idle. Switch Transformer adds a small loss that is 1 "
    "when assignments f and router probabilities P are spread evenly and grows when they pile up.")
st.latex(r"y=\sum_{e\in\mathrm{TopK}(g(x))} g_e(x)\,\mathrm{FFN}_e(x),\quad g(x)=\mathrm{softmax}(xW_r)"
         r"\qquad \mathcal{L}_{aux}=E\sum_{e=1}^{E} f_e\,P_e,\quad E_{\text{eff}}=e^{-\sum_e f_e\log f_e}")

source, loaded = sidebar.current()
state.keep({"moe_text": "held-out story", "moe_pair": "top-1"})  # kept while another tab is open
view = MoeView(source, loaded, routing.pick_variant(loaded))  # above the tabs: routing and cost both follow it
st.caption("Only the open tab is computed.")
state.lazy_tabs("moe_tab", {name: partial(draw, view) for name, draw in TABS.items()})
