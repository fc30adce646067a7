"""app/figures/causal_charts.py as plain functions: the signed grids are centred on zero and keep
their values; the residual grid labels its tokens; the prompt-pair figure draws first − second."""

from __future__ import annotations

import numpy as np
import pytest

from app.figures import causal_charts


def test_an_effect_grid_is_centred_on_zero_and_keeps_the_values():
    values = np.array([[0.5, -2.0], [0.0, 1.0]])
    trace = causal_charts.effect_grid(values, title="patching").data[0]
    assert np.array_equal(np.asarray(trace.z), values)
    assert trace.zmin == -2.0 and trace.zmax == 2.0 and trace.zmid == 0


def test_an_all_zero_grid_still_has_a_range():
    trace = causal_charts.effect_grid(np.zeros((2, 3)), title="nothing").data[0]
    assert trace.zmin == -1.0 and trace.zmax == 1.0


def test_the_residual_grid_has_one_labelled_column_per_token():
    values = np.arange(6.0).reshape(2, 3) - 1
    trace = causal_charts.residual_patching(values, ["the", "cat", "the"]).data[0]
    assert list(trace.x) == ["0:the", "1:cat", "2:the"] and np.asarray(trace.z).shape == (2, 3)
    assert trace.zmax == 4.0


def test_the_pair_figure_draws_both_maps_and_their_difference():
    first = np.array([[1.0, 0.0], [0.25, 0.75]])
    second = np.array([[1.0, 0.0], [0.5, 0.5]])
    figure = causal_charts.pair_maps(first, second, ["a", "b"], ["a", "c"])
    assert len(figure.data) == 3
    difference = np.asarray(figure.data[2].z, dtype=float)
    assert np.isnan(difference[0, 1])  # the future stays empty
    assert difference[1, 0] == pytest.approx(-0.25) and difference[1, 1] == pytest.approx(0.25)
    assert list(figure.data[1].x) == ["0:a", "1:c"]
    assert list(figure.data[2].x) == list(figure.data[2].y) == ["0:a", "1:b/c"]  # both tokens where they differ


def test_the_pair_figure_refuses_maps_of_different_shapes():
    with pytest.raises(ValueError, match="differ in shape"):
        causal_charts.pair_maps(np.eye(2), np.eye(3), ["a", "b"], ["a", "b", "c"])
