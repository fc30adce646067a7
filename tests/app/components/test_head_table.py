"""The head table component's data (app/components/head_table): every row and column of the page's
table, integers as integers, undefined metrics as None (drawn "—"), each column's help text; and on the
page (AppTest, the zoo's tiny model) the rows are the page's head table. What the browser does with them
(sorting by a click, "—") is tested in tests/browser/test_head_table.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from app.components.head_table import table_data
from tests.helpers.apptest import app_on, no_errors
from tests.helpers.head_table import column_help, head_table
from txviz.analysis.heads.metrics import METRICS


def test_the_data_keeps_every_value_integers_whole_and_undefined_as_none():
    table = pd.DataFrame({"layer": [0, 0, 1], "head": [0, 1, 0], "entropy": [0.5, 1.25, 2.0],
                          "induction": [np.nan, 0.125, np.nan]})
    data = table_data(table, {"entropy": "spread", "induction": "copies"})
    assert [c["name"] for c in data["columns"]] == ["layer", "head", "entropy", "induction"]
    assert [c["decimals"] for c in data["columns"]] == [None, None, 3, 3]
    assert [c["help"] for c in data["columns"]] == ["", "", "spread", "copies"]
    assert data["rows"] == [[0, 0, 0.5, None], [0, 1, 1.25, 0.125], [1, 0, 2.0, None]]
    assert all(type(v) is int for row in data["rows"] for v in row[:2])
    json.dumps(data, allow_nan=False)  # what Streamlit sends: plain JSON, no NaN


def test_the_page_sends_every_head_with_its_metrics_and_help():
    from txviz.loading.zoo import SHIPPED_ZOO

    at = app_on(str(SHIPPED_ZOO / "base"), "One two three one two three.").run()
    no_errors(at)
    shown = head_table(at)
    layers, heads = shown["layer"].max() + 1, shown["head"].max() + 1
    assert len(shown) == layers * heads and not shown.duplicated(["layer", "head"]).any()
    assert shown["entropy"].notna().all() and all(0 < v <= 1 + 1e-6 for v in shown["max_weight"])
    helps = column_help(at)
    assert "induction heads" in helps["induction"]
    for metric in METRICS:  # a metric's help says why it is "—" exactly where the prompt leaves it undefined
        assert ("where undefined" in helps[metric]) == bool(shown[metric].isna().any()), metric
    assert at.get("download_button")[-1].label == "Download the table (CSV)"
