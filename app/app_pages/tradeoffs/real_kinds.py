"""In the "MHA / GQA / MQA" tab: the two pretrained models (SmolLM2 GQA 9q/3kv, Gemma 3 MQA 4q/1kv)
and the zoo's tiny MHA / GQA / MQA variants in one table, each cache measured on a real KVCache of the
model's shape (txviz.analysis.kv.kinds)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import cache
from app.services import real_models
from txviz.analysis.tradeoffs import zoo_results

LONG_TOKENS = 4096


def real_and_zoo() -> None:
    st.subheader("Two real models beside the zoo")
    fetched = tuple(real_models.fetched_configs().items())
    zoo = tuple((r["variant"], r["config"], r["val_loss"]) for r in zoo_results.zoo_rows(zoo_results.ATTENTION_KINDS) if r["trained"])
    missing = real_models.missing_names()
    if missing:
        st.caption(f"Not fetched yet (choose it in the sidebar to add it here): {', '.join(missing)}.")
    if not fetched and not zoo:
        return
    st.dataframe(pd.DataFrame(cache.kind_rows(fetched, zoo, LONG_TOKENS)), hide_index=True, key="to_real_kinds")
    st.caption(f"Measured: a KVCache of each model's shape filled with 1 and with {LONG_TOKENS} tokens (or its "
               "context, if shorter); bytes of the filled slots per token. SmolLM2 keeps 3 KV heads for its 9 "
               "query heads (a third of MHA's cache), Gemma 3 one for its 4 (a quarter) — and its 15 sliding "
               "layers stop at 512 tokens, so over a long generation it keeps far less per token than at the "
               "first. The real models have no MHA twin to compare quality with; the zoo's variants do.")
