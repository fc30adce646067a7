"""What the calculator's pages say about a config.json they sized (the KV page's calculator and the Tradeoffs
page's upload table): the generic rule's assumptions and every key no reader understood, as warnings beside
the figures, and, where the layers differ, what each kind of layer keeps."""

from __future__ import annotations

import streamlit as st

from app.ui.widgets import plain
from txviz.analysis.kv.layer_figures import differs, group_figures
from txviz.analysis.kv.memory_model import MemoryModel

GENERIC = "Read by txviz's generic rule, which assumed: "


def config_warnings(model: MemoryModel) -> None:
    """A family read by the generic rule says so; each key the figures leave out is named."""
    if model.assumptions:
        st.warning(GENERIC + plain("; ".join(model.assumptions)) + ".")
    if model.ignored:
        st.warning("The figures leave out what the config says here:\n\n"
                   + "\n".join(f"- {plain(warning)}" for warning in model.ignored))


def layer_rows(model: MemoryModel, tokens: int, batch: int, kv_dtype: str) -> list[dict]:
    """One row per kind of layer, its bytes as numbers."""
    return [{"layers": row["layers"], "type": row["layer_type"], "window or chunk": row["window"],
             "without positions": row["without_positions"], f"KV bytes/token ({kv_dtype})": row["kv_bytes_per_token"],
             f"bytes at {tokens:,} tokens": row["bytes_at_tokens"],
             "fixed state bytes/sequence": row["state_bytes_per_sequence"]}
            for row in group_figures(model, tokens, batch, kv_dtype)]


def layer_table(model: MemoryModel, tokens: int, batch: int = 1, kv_dtype: str = "bf16") -> None:
    """Each kind of layer in a sentence, then its numbers, only where the layers differ in what they keep or
    in positions."""
    if not differs(model):
        return
    st.markdown(f"**What each kind of layer keeps** (batch {batch:,}, at {tokens:,} tokens)\n\n"
                + "\n".join(f"- {plain(row['summary'])}" for row in group_figures(model, tokens, batch, kv_dtype)))
    rows = layer_rows(model, tokens, batch, kv_dtype)
    numbers = {column: st.column_config.NumberColumn(format="localized") for column in rows[0] if column != "type"}
    st.dataframe(rows, hide_index=True, column_config=numbers)  # 1,207,959,552 rather than 1207959552
