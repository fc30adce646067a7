"""Every head's metrics on the prompt: the sortable table, its CSV, and the rows the JSON export takes."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.components.head_table import head_table as sortable_table
from txviz.analysis.heads.metrics import METRICS

METRIC_HELP = {
    "entropy": "spread of the weights (nats); low = focused",
    "first_token_mass": "weight on the first token (the attention sink)",
    "prev_token": "weight on the token just before",
    "duplicate_token": "weight on earlier copies of the same token",
    "induction": "weight on the token after an earlier copy (induction heads)",
    "max_weight": "largest weight per row",
}
UNDEFINED_HELP = {  # why a metric can have no value on a prompt (the mean over no rows)
    "entropy": "the prompt has a single token", "first_token_mass": "the prompt has a single token",
    "max_weight": "the prompt has a single token", "prev_token": "the prompt has a single token",
    "duplicate_token": "no token of this prompt repeats an earlier one",
    "induction": "no token of this prompt repeats an earlier one (with a token before it)",
}


def head_rows(table: pd.DataFrame) -> list[dict]:
    """The table as records, undefined (NaN) as None: what JSON can hold."""
    return [{k: (None if v != v else v) for k, v in row.items()} for row in table.to_dict("records")]


def column_help(table: pd.DataFrame) -> dict[str, str]:
    """Each metric's help text; where the prompt leaves a metric undefined, why it shows "—"."""
    return {m: METRIC_HELP[m] + (f". “—” where undefined: {UNDEFINED_HELP[m]}" if table[m].isna().any() else "")
            for m in METRICS}


def head_table(table: pd.DataFrame) -> None:
    st.subheader("Every head, sortable", help="Click a column's header to sort by it (again: the other way); "
                 "hover a header for what it measures.")
    sortable_table(table, column_help(table), key="head_table")
    st.download_button("Download the table (CSV)", lambda: table.to_csv(index=False), file_name="heads.csv",
                       mime="text/csv", key="download_head_table", on_click="ignore")  # the CSV is written on a click
