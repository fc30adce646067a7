"""The block page's residual-stream heatmap colours ‖x‖ on a log scale, so a 100× sink token does not
flatten every other cell into one colour; hover and colour bar speak in the norms themselves."""

from __future__ import annotations

import numpy as np

from app.figures import charts

NORMS = np.array([[2.7, 20_500.0], [140.0, 874.0], [180.0, 2_600.0]])  # (L+1, T): SmolLM2-like sizes


def test_colour_is_log10_of_the_norm_and_hover_shows_the_norm():
    trace = charts.residual_norms(NORMS, ["a", "b"]).data[0]
    np.testing.assert_allclose(np.asarray(trace.z), np.log10(NORMS).T)
    np.testing.assert_array_equal(np.asarray(trace.customdata), NORMS.T)
    assert "%{customdata:.1f}" in trace.hovertemplate


def test_the_colour_bar_is_labelled_in_norms_at_its_log_positions():
    bar = charts.residual_norms(NORMS, ["a", "b"]).data[0].colorbar
    assert bar.ticktext == ("10", "100", "1,000", "10,000")  # past two decades: powers of ten only
    values = [float(text.replace(",", "")) for text in bar.ticktext]
    np.testing.assert_allclose(bar.tickvals, np.log10(values))
    narrow = charts.residual_norms(np.array([[0.3, 0.5], [1.0, 2.0]]), ["a", "b"]).data[0].colorbar
    assert narrow.ticktext == ("0.5", "1", "2")


def test_a_zero_norm_is_drawn_as_the_least_not_minus_infinity():
    trace = charts.residual_norms(np.array([[0.0, 4.0], [2.0, 8.0]]), ["a", "b"]).data[0]
    assert np.isfinite(np.asarray(trace.z)).all() and np.asarray(trace.z).min() == np.log10(2.0)


def test_a_few_layers_are_ticked_on_whole_layers():
    # a 3-layer checkpoint's columns were ticked −0.5, 0, 0.5, … 3.5 in chromium
    assert charts.residual_norms(np.ones((4, 2)), ["a", "b"]).layout.xaxis.dtick == 1
