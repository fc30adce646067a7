"""Reading the Attention page's head table component (app/components/head_table) back from an AppTest:
the rows it was sent, as a DataFrame (undefined values NaN), and each column's help text."""

from __future__ import annotations

import json

import pandas as pd


def head_table_data(at) -> dict:
    """The component's data (key "head_table"): its columns (name, help, decimals) and rows."""
    (element,) = [e for e in at.get("bidi_component") if e.proto.id.endswith("head_table")]
    return json.loads(element.proto.json)


def head_table(at) -> pd.DataFrame:
    """Every head's row as the browser gets it; None (shown "—") read back as NaN in the metric columns."""
    data = head_table_data(at)
    frame = pd.DataFrame(data["rows"], columns=[c["name"] for c in data["columns"]])
    metrics = [c["name"] for c in data["columns"] if c["decimals"] is not None]
    return frame.astype({m: float for m in metrics})


def column_help(at) -> dict[str, str]:
    return {c["name"]: c["help"] for c in head_table_data(at)["columns"]}
