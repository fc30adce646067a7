"""Chart builders are pure functions: check the figure data they produce."""

from __future__ import annotations

import numpy as np
import pytest

from app import charts


def test_attention_heatmap_blanks_the_future_and_labels_tokens():
    probs = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    fig = charts.attention_heatmap(probs, ["a", "b", "a"], ["a", "b", "a"])
    heat = fig.data[0]
    z = np.array(heat.z, dtype=float)
    assert np.isnan(z[0, 1]) and np.isnan(z[0, 2]) and np.isnan(z[1, 2])
    assert z[2, 0] == np.float32(probs[2, 0])
    assert list(heat.x) == ["0:a", "1:b", "2:a"]  # duplicate tokens stay separate categories
    assert heat.customdata is None  # the hover reads the labels: no per-cell copy of the tokens to send
    assert "query %{y}" in heat.hovertemplate and "key %{x}" in heat.hovertemplate and "weight" in heat.hovertemplate


def test_head_grid_points_carry_layer_and_head():
    values = np.arange(6).reshape(2, 3)
    fig = charts.head_grid(values, metric="m", selected=(1, 2))
    grid = fig.data[0]
    assert len(grid.x) == 6
    assert [list(p) for p in grid.customdata][5] == [1, 2]
    assert list(grid.marker.color) == list(range(6))
    assert fig.data[1].x == (2,) and fig.data[1].y == (1,)


@pytest.mark.parametrize("event,expected", [
    ({"selection": {"points": [{"point_index": 7, "customdata": {"0": 1, "1": 2}}]}}, (1, 2)),  # from a browser
    ({"selection": {"points": [{"customdata": {"1": 12, "0": 3, "2": 0}}]}}, (3, 12, 0)),  # keys in any order
    ({"selection": {"points": [{"customdata": [4, 5]}]}}, (4, 5)),
    ({"selection": {"points": []}}, None), ({"selection": {"points": [{"x": 1}]}}, None), (None, None),
])
def test_the_picked_point_reads_customdata_as_the_browser_sends_it(event, expected):
    from app.widgets import picked_customdata

    assert picked_customdata(event) == expected


def test_head_view_draws_one_line_per_attended_key():
    weights = np.array([0.5, 0.0, 0.5, 0.9])  # key 3 is after the query: never drawn
    fig = charts.head_view(weights, ["a", "b", "c", "d"], query=2)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert sorted(line.y[1] for line in lines) == [0, 2]


def test_token_strip_escapes_html():
    html = charts.token_strip_html(["<b>", " x"], [False, False])
    assert "&lt;b&gt;" in html and "␣x" in html


def test_residual_norms_and_matrix_shapes():
    fig = charts.residual_norms(np.ones((4, 3)), ["a", "b", "c"])
    assert np.array(fig.data[0].z).shape == (3, 4)
    fig = charts.matrix(np.array([[1.0, -np.inf], [2.0, -1.0]]), title="m")
    assert fig.data[0].zmax == 2.0
