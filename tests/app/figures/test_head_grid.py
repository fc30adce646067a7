"""The head grid component's data (app/figures/head_grid.py): one cell per head in layer order, each
coloured by plotly's Viridis for its value on the grid's range, grey with an "undefined" hover where the
metric has no value for the prompt, the page's head selected, and a colour bar of the same scale."""

from __future__ import annotations

import numpy as np
from plotly.colors import sample_colorscale

from app.figures import charts
from app.figures.head_grid import grid_view


def test_each_head_is_its_cell_with_its_colour_and_value():
    values = np.arange(6, dtype=float).reshape(2, 3)
    view = grid_view(values, metric="m", selected=(1, 2))
    assert view["layers"] == [0, 1] and view["n_heads"] == 3 and view["selected"] == [1, 2]
    colors = [color for row in view["colors"] for color in row]
    assert colors == charts.scale_colors(np.arange(6), 0, 5) == sample_colorscale("Viridis", list(np.arange(6) / 5))
    assert view["hover"][1][2] == "layer 1 head 2<br>m 5.000" and view["hover"][0][1] == "layer 0 head 1<br>m 1.000"
    assert (view["low"], view["high"]) == (0.0, 5.0) and view["scale"][0] == [0.0, "#440154"]
    assert view["scale"][-1][0] == 1.0 and view["height"] == 110 + 22 * 2


def test_undefined_heads_are_grey_and_say_why():
    values = np.array([[0.5, np.nan], [np.nan, 0.25]])
    view = grid_view(values, metric="induction", layers=[4, 5])
    assert view["layers"] == [4, 5] and view["selected"] is None
    assert view["colors"][0][1] == view["colors"][1][0] == charts.MASKED_COLOR
    assert [view["colors"][0][0], view["colors"][1][1]] == charts.scale_colors([0.5, 0.25], 0.25, 0.5)
    assert view["hover"][0][1] == "layer 4 head 1<br>induction undefined for this prompt"
    assert view["hover"][1][1] == "layer 5 head 1<br>induction 0.250"


def test_a_grid_with_no_value_is_all_grey_on_a_unit_range():
    view = grid_view(np.full((2, 2), np.nan), metric="m", selected=(0, 0))
    assert {color for row in view["colors"] for color in row} == {charts.MASKED_COLOR}
    assert (view["low"], view["high"]) == (0.0, 1.0)
