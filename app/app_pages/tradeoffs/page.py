"""Design tradeoffs page: each choice as a formula on the loaded model's config, beside
the lab zoo's measured losses, and two measured on this machine (FlashAttention, parallel reading).
Each group of tabs is drawn by one module of this folder."""

from __future__ import annotations

from functools import partial

import streamlit as st

from app.app_pages.tradeoffs import attention_kinds, capacity, context, measured
from app.app_pages.tradeoffs.view import TradeoffsView
from app.services.zoo import trained
from app.ui import sidebar, state
from txviz.analysis.tradeoffs.tables import kv_dtype_name
from txviz.loading.zoo import SHIPPED_ZOO, read_txviz_config

TABS = {"Depth vs width": capacity.depth_vs_width, "Dense vs MoE": capacity.dense_vs_moe,
        "MHA / GQA / MQA": attention_kinds.attention_kinds, "Context length": context.context_length,
        "FlashAttention": measured.flash_attention, "Parallel vs sequential": measured.parallel_vs_sequential,
        "Positions beyond training": context.positions_beyond}

st.title("Design tradeoffs")
st.markdown(
    "Within a budget of parameters, compute and memory, every architecture choice buys something and "
    "pays for it elsewhere. Each tab puts one choice in a formula applied to the loaded model and, beside "
    "it, what the lab's zoo measured: tiny models trained identically except for that one choice.")

source, loaded = sidebar.current()
view = TradeoffsView(source, loaded, kv_dtype_name(loaded.dtype.itemsize),
                     read_txviz_config(SHIPPED_ZOO / "base") if trained(["base"]) else None)
# only the open tab runs (the zoo's window losses, the model's shapes): a click on another reruns the page
state.lazy_tabs("tradeoffs_tab", {name: partial(draw, view) for name, draw in TABS.items()})
