"""The figures the Attention page builds on every rerun (the head view, the map's figure) skip plotly.py's
property checks (charts.unvalidated): each must still be one plotly's schema accepts, and serialize to
exactly the JSON the same figure built as validated graph objects gives (what the browser draws)."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from app.figures import charts
from app.components.head_maps.payload import view_data

RNG = np.random.default_rng(0)
TOKENS = [f"t{i}" for i in range(40)]

BUILDERS = {
    "head view": lambda: charts.head_view(RNG.random(40), TOKENS, 30),
    "head view, long": lambda: charts.head_view(RNG.random(300), [f"t{i}" for i in range(300)], 299),
    "attention heatmap": lambda: charts.attention_heatmap(np.tril(RNG.random((40, 40))), TOKENS, TOKENS, title="L0 H1"),
    "attention region": lambda: charts.attention_heatmap(RNG.random((5, 40)), TOKENS[10:15], TOKENS, q_offset=10),
}


@pytest.mark.parametrize("name", list(BUILDERS))
def test_an_unvalidated_figure_is_the_validated_one(name):
    figure = BUILDERS[name]()
    validated = go.Figure(figure.to_dict())  # raises on a property plotly does not know or a value it refuses
    assert json.loads(figure.to_json()) == json.loads(validated.to_json())


def test_a_bad_property_is_caught_by_the_check_above():
    """The check is not vacuous: plotly refuses what a typo in a builder's dicts would produce."""
    with pytest.raises(ValueError):
        go.Figure(charts.unvalidated([dict(type="heatmap", colorscal="Blues")], {}).to_dict())


def test_the_component_view_carries_the_scale_as_plotly_stores_it():
    """The canvas reads the view's colour scale as (position, colour) steps, never a scale's name."""
    view = view_data(TOKENS, prompt="p", block=1, cells=40, n_layers=2, n_heads=3, all_layers=True, layer=1,
                     head=2, title="Layer 1, head 2")
    scale = view["figure"]["data"][0]["colorscale"]
    assert isinstance(scale, list) and scale[0] == [0.0, "rgb(247,251,255)"] and scale[-1][0] == 1.0
