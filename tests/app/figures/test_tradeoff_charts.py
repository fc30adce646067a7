"""Chart builders of the MoE and tradeoffs pages: pure functions, checked on their figure data."""

from __future__ import annotations

import numpy as np

from app.figures import tradeoff_charts


def test_expert_map_colours_the_best_expert_and_hovers_every_choice():
    ids = np.array([[[2, 0], [1, 3]], [[0, 1], [3, 2]], [[2, 1], [2, 0]]])  # (T=3, L=2, K=2)
    gates = np.full(ids.shape, 0.5)
    fig = tradeoff_charts.expert_map(ids, gates, ["a", "b", "a"], 4, layers=[5, 6])
    heat = fig.data[0]
    assert np.array_equal(np.array(heat.z), ids[:, :, 0])
    assert list(heat.x) == ["5", "6"] and list(heat.y) == ["0:a", "1:b", "2:a"]
    assert "expert 1 (0.50), expert 3 (0.50)" in heat.text[0][1] and "layer 6" in heat.text[0][1]
    assert (heat.zmin, heat.zmax) == (-0.5, 3.5) and len(heat.colorscale) == 8  # one flat band per expert


def test_expert_load_bars_one_trace_per_expert_and_an_even_line():
    load = np.array([[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    fig = tradeoff_charts.expert_load_bars(load)
    bars = [trace for trace in fig.data if trace.type == "bar"]
    assert len(bars) == 4 and list(bars[0].y) == [0.7, 0.25]
    assert list(bars[0].x) == ["layer 0", "layer 1"]
    assert fig.layout.shapes[0].y0 == 0.25


def test_the_even_share_is_named_in_the_legend_not_on_the_line():
    """A label on the line ran under the bars (and past the plot) in a narrow column; the legend has room."""
    fig = tradeoff_charts.expert_load_bars(np.full((3, 8), 1 / 8))
    assert not fig.layout.annotations
    [even] = [trace for trace in fig.data if trace.type == "scatter"]
    assert even.name == "even share (1/8 = 12%)" and even.line.dash == fig.layout.shapes[0].line.dash == "dot"


def test_histograms_labelled_points_and_grouped_bars():
    fig = tradeoff_charts.histograms({"best": np.array([0.9, 0.8]), "second": np.array([0.1, 0.2])}, x_range=(0, 1), bins=10)
    assert [t.name for t in fig.data] == ["best", "second"] and fig.data[0].xbins.size == 0.1
    points = tradeoff_charts.labelled_points([1, 2], [3.0, 4.0], ["mha", "mqa"], log_x=True)
    assert list(points.data[0].text) == ["mha", "mqa"] and points.layout.xaxis.type == "log"
    bars = tradeoff_charts.grouped_bars(["rope", "learned"], {"1×": [1.0, 1.1], "4×": [1.5, None]})
    assert len(bars.data) == 2 and np.isnan(bars.data[1].y[1])


def test_labels_of_points_of_equal_size_alternate_sides_and_fit_inside_the_axis():
    # the zoo's four MoE variants have the same total parameters and losses 0.001 apart
    x = [162_496, 458_432, 458_432, 458_432, 458_432]
    y = [1.053, 1.0555, 1.0982, 1.1097, 1.0969]
    fig = tradeoff_charts.labelled_points(x, y, ["base", "t1", "t1b", "t2", "t2b"], y_error=[0.01] * 5)
    sides = dict(zip(fig.data[0].text, fig.data[0].textposition))
    by_loss = ["t1", "t2b", "t1b", "t2"]  # the shared x's points, in order of loss: neighbours on opposite sides
    assert all(sides[a] != sides[b] for a, b in zip(by_loss, by_loss[1:]))
    low, high = fig.layout.xaxis.range
    assert low < min(x) and high > max(x) + 0.1 * (max(x) - min(x))  # room for a label right of the last point
    assert fig.data[0].cliponaxis is False
