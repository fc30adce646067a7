"""The Decoding page's run figure, the "decided at layer" strip: built from plain dicts, so it must be one
plotly's schema accepts and serialize as the validated figure does; its first top-1 ring sits where the
data says. (A step's charts are drawn in the browser: tests/browser/test_decoding.py reads them back.)"""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go

from app.figures import decoding_charts

RNG = np.random.default_rng(0)
TOKENS = [f"t{i}" for i in range(30)]


def lens():
    return decoding_charts.lens_strip(RNG.integers(1, 500, (5, 7)).astype(float), [3, None, 0, 6, 2], TOKENS[:5],
                                      by="rank")


def test_an_unvalidated_figure_is_the_validated_one():
    figure = lens()
    validated = go.Figure(figure.to_dict())
    assert json.loads(figure.to_json()) == json.loads(validated.to_json())


def test_the_lens_strip_rings_the_first_top1_point_of_each_token():
    ring = lens().to_dict()["data"][1]
    assert list(ring["x"]) == ["L2", "embed", "L5", "L1"] and len(ring["y"]) == 4


def test_the_lens_strip_rows_show_a_tokens_spaces_and_line_ends_as_the_pills_do():
    tokens = [" the", "'t", "\n", "", "a<b"]
    rows = decoding_charts.lens_strip(RNG.integers(1, 500, (5, 7)).astype(float), [None] * 5, tokens,
                                      by="rank").to_dict()["data"][0]["y"]
    assert list(rows) == ["0:␣the", "1:'t", "2:↵", "3:∅", "4:a&lt;b"]  # " the" no longer reads like "the"
