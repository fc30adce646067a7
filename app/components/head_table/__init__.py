"""The Attention page's table of every head's metrics, sortable, drawn as a plain HTML table by a
``st.components.v2`` component in the page's own DOM (plain JavaScript, no build step).

It replaced ``st.dataframe`` (issue 14): the data grid repainted its canvas and rebuilt its columns on
every new prompt, about a quarter of a second of chromium's main thread per prompt on this machine; the
component keeps its element and rewrites the table's body in place. A click on a column's header sorts
by it (again: the other way); undefined metrics are "—" and sort last; each metric's header carries its
help text. The data is the table's columns and rows as JSON (NaN as null), so a test reads the numbers
back exactly as the browser gets them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import streamlit as st

HERE = Path(__file__).parent

_mount = st.components.v2.component(
    "txviz_head_table", js=(HERE / "head_table.js").read_text(encoding="utf-8"),
    css=(HERE / "head_table.css").read_text(encoding="utf-8"), isolate_styles=False)


def table_data(table: pd.DataFrame, help_text: dict[str, str], decimals: int = 3) -> dict:
    """What the component draws: the columns (with their help text and decimals; integer columns none),
    and the rows as lists, an undefined (NaN) value as None."""
    columns = [{"name": str(name), "help": help_text.get(name, ""),
                "decimals": None if pd.api.types.is_integer_dtype(table[name]) else decimals} for name in table.columns]
    rows = [[_plain(value) for value in row] for row in table.itertuples(index=False, name=None)]
    return {"columns": columns, "rows": rows}


def _plain(value):
    """A cell as JSON holds it: numpy scalars as Python numbers, NaN as None."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value


def head_table(table: pd.DataFrame, help_text: dict[str, str], *, key: str) -> None:
    """Mount ``table`` (one row per head), each column's header titled with ``help_text[column]``."""
    _mount(key=key, data=table_data(table, help_text))
