"""KV cache and memory page: what serving a model costs (weights + KV cache +
activations against a GPU), the real cache filling up during generation, cached against uncached
decoding, and MHA / GQA / MQA tried on the loaded model. Only the open tab runs: the ones that run the
model compute when opened, and the long sweep says how long it will take and can be stopped."""

from __future__ import annotations

import streamlit as st

from app.app_pages.kv_cache import cached_vs_uncached, calculator, growth, real_models, sharing
from app.ui import sidebar, state

CALCULATOR = "Memory calculator"
MODEL_TABS = {"Cache growth": growth.draw, "Cached vs uncached": cached_vs_uncached.draw,
              "Sharing KV heads": sharing.draw, "Real models side by side": real_models.draw}  # run on the loaded model
FOLLOWING = ("mem_kind", "live_kv", "layers_kv")  # kept too; follow() resets them when the model changes

st.title("KV cache & memory")
st.markdown(
    "A decoder generates one token at a time, and the keys and values of earlier tokens never change. "
    "So they are kept — the **KV cache** — and each new token only computes its own q, k, v and attends "
    "to the cache: O(n) work per step instead of recomputing all n tokens. The price is memory that "
    "grows with every token, in every layer, for every KV head. Sharing KV heads between query heads "
    "(GQA, or one for all: MQA) divides it.")
st.latex(r"\text{KV bytes} = 2 \times L \times H_{kv} \times d_{head} \times T \times B \times \text{bytes per element}")

state.keep({**calculator.DEFAULTS, **growth.DEFAULTS, **cached_vs_uncached.DEFAULTS, **sharing.DEFAULTS,
            **{key: state.get(key) for key in FOLLOWING if state.has(key)}})
st.caption("Only the open tab is computed: *Cache growth* and *Sharing KV heads* run the loaded model when opened.")
# the calculator needs no model: it works even when none loads; the other tabs load it when opened
state.lazy_tabs("kv_tab", {CALCULATOR: calculator.draw,
                           **{name: lambda draw=draw: draw(*sidebar.current()) for name, draw in MODEL_TABS.items()}})
