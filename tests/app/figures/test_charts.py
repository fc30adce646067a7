"""Chart builders are pure functions: check the figure data they produce."""

from __future__ import annotations

import numpy as np
import pytest

from app.figures import charts, tradeoff_charts


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


def test_the_grid_scale_matches_plotlys_and_survives_a_single_or_no_value():
    from plotly.colors import sample_colorscale

    assert charts.scale_colors([2.0, 3.0, 4.0], 2.0, 4.0) == sample_colorscale("Viridis", [0.0, 0.5, 1.0])
    assert charts.scale_colors([7.0], 7.0, 7.0) == sample_colorscale("Viridis", [0.0])


@pytest.mark.parametrize("event,expected", [
    ({"selection": {"points": [{"point_index": 7, "customdata": {"0": 1, "1": 2}}]}}, (1, 2)),  # from a browser
    ({"selection": {"points": [{"customdata": {"1": 12, "0": 3, "2": 0}}]}}, (3, 12, 0)),  # keys in any order
    ({"selection": {"points": [{"customdata": [4, 5]}]}}, (4, 5)),
    ({"selection": {"points": []}}, None), ({"selection": {"points": [{"x": 1}]}}, None), (None, None),
])
def test_the_picked_point_reads_customdata_as_the_browser_sends_it(event, expected):
    from app.ui.widgets import picked_customdata

    assert picked_customdata(event) == expected


def test_head_view_draws_one_line_per_attended_key():
    weights = np.array([0.5, 0.0, 0.5, 0.9])  # key 3 is after the query: never drawn
    fig = charts.head_view(weights, ["a", "b", "c", "d"], query=2)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert sorted(line.y[1] for line in lines) == [0, 2]


def test_head_view_labels_sit_outside_the_lines():
    """The lines run from x = 0 to x = 1; the query labels end at 0 and the key labels start at 1
    (plotly's "middle right" puts text right of the point: on the lines, as it was)."""
    fig = charts.head_view(np.array([0.2, 0.3, 0.5]), ["a", "b", "c"], query=2)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert all(tuple(line.x) == (0, 1) for line in lines)
    left, right = [t for t in fig.data if t.mode == "text"]
    assert set(left.x) == {0} and left.textposition == "middle left"
    assert set(right.x) == {1} and right.textposition == "middle right"
    low, high = fig.layout.xaxis.range
    assert low <= -0.8 and high >= 1.8  # room for the labels on both sides


def test_token_strip_escapes_html():
    html = charts.token_strip_html(["<b>", " x"], [False, False])
    assert "&lt;b&gt;" in html and "␣x" in html


def test_token_strip_scrolls_and_carries_tooltips():
    html = charts.token_strip_html(["<|endoftext|>", "😀", "…"], [True, False, False], max_height_px=220,
                                   titles=["token 0", "token 1 · bytes 98 80 · one character with tokens 1–2",
                                           "a \"quoted\" <tip>"])
    assert "max-height:220px" in html and "overflow-y:auto" in html
    assert 'title="token 1 · bytes 98 80' in html and "&quot;quoted&quot; &lt;tip&gt;" in html
    assert html.count("class=s") == 1  # the sink
    assert len(charts.token_strip_html(["tok"] * 1000, [False] * 1000)) < 60_000  # styled once, not per box


def test_token_strip_greys_the_tokens_it_is_given_apart_from_highlights_and_sinks():
    html = charts.token_strip_html(["<|endoftext|>", "a", "b", "c", "d"], [True, False, False, False, False],
                                   highlight={1, 3}, greyed={0, 3, 4}, titles=[f"t{i}" for i in range(5)])
    boxes = html.split("<span")[1:]
    kinds = [box.split(" title=")[0].strip() for box in boxes]
    assert kinds == ["class=s", "class=h", "", "class=g", "class=g"]  # a sink stays a sink; grey wins over yellow
    assert "span.g{" in html and html.count("class=g") == 2
    assert charts.token_strip_html(["a", "b"], [False, False], greyed=set()).count("class=g") == 0


def test_log_axis_ticks_once_per_decade():
    assert charts.log_axis([1, 10, 1e4])["dtick"] == 1
    assert charts.log_axis([1e-3, 1e9])["dtick"] == 2  # twelve decades: every other one
    assert charts.log_axis([128, 8192])["tickvals"] == [200, 500, 1000, 2000, 5000]  # 1-2-5, written out
    assert charts.log_axis([2, 9]) == {"type": "log"}  # within a decade: plotly's own ticks
    # 4 to 32 tokens: plotly's own ticks read "4 5 6 7 8 9 10 2 3" (20 and 30 shortened)
    assert charts.log_axis([4, 8, 16, 32])["tickvals"] == [4, 5, 6, 7, 8, 9, 10, 20, 30]
    assert charts.log_axis([0, -1, np.nan]) == {"type": "log"}
    fig = charts.lines([1, 10, 100, 1000], {"a": [1, 1e2, 1e4, 1e6], "b": [0, 1, 2, 3]}, log_x=True, log_y=True)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis.dtick == 1 and fig.layout.yaxis.dtick == 1
    assert charts.bars(["x", "y"], np.array([1e-4, 1.0]), log_y=True).layout.yaxis.dtick == 1
    assert tradeoff_charts.labelled_points([1, 1e6], [1, 2], ["a", "b"], log_x=True).layout.xaxis.dtick == 1


def test_step_by_step_matrices_carry_token_labels():
    labels = charts.token_labels(["a", "b", "a"])
    fig = charts.matrix(np.zeros((3, 3)), title="m", x=labels, y=labels)
    assert list(fig.data[0].x) == ["0:a", "1:b", "2:a"] and list(fig.data[0].y) == labels


def test_residual_norms_and_matrix_shapes():
    fig = charts.residual_norms(np.ones((4, 3)), ["a", "b", "c"])
    assert np.array(fig.data[0].z).shape == (3, 4)
    fig = charts.matrix(np.array([[1.0, -np.inf], [2.0, -1.0]]), title="m")
    assert fig.data[0].zmax == 2.0


@pytest.mark.parametrize("layers", [2, 4])
def test_a_few_layers_are_ticked_on_whole_layers(layers):
    # left to plotly, a 2-layer heatmap (the zoo's shallow model, tiny checkpoints) is ticked −0.5, 0, 0.5, 1, 1.5
    fig = charts.metric_heatmap(np.zeros((layers, 4)), title="t")
    assert fig.layout.yaxis.dtick == 1 and fig.layout.yaxis.tick0 in (None, 0)
