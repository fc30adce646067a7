"""Every head's metrics on the prompt: the sortable table, its CSV, and the rows the JSON export takes."""

from __future__ import annotations

import pandas as pd
import streamlit as st

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


def head_table(table: pd.DataFrame) -> None:
    st.subheader("Every head, sortable")
    undefined = [m for m in METRICS if table[m].isna().any()]
    st.dataframe(table, hide_index=True, key="head_table", placeholder="—",  # a missing number, not "None"
                 column_config={m: st.column_config.NumberColumn(m, help=METRIC_HELP[m] + (
                     f". “—” where undefined: {UNDEFINED_HELP[m]}" if m in undefined else ""), format="%.3f")
                     for m in METRICS})
    st.download_button("Download the table (CSV)", lambda: table.to_csv(index=False), file_name="heads.csv",
                       mime="text/csv", key="download_head_table", on_click="ignore")  # the CSV is written on a click
