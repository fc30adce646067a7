"""txviz.analysis.positions.forward_speed: a fixed cost per pass plus a rate, fitted to two passes."""

from __future__ import annotations

import pytest

from txviz.analysis.positions.forward_speed import ForwardSpeed, fit_forward_speed


def test_two_passes_on_a_line_give_back_its_fixed_cost_and_rate():
    truth = ForwardSpeed(fixed_seconds=2.0, gflops=40.0)
    speed = fit_forward_speed((4.0, truth.seconds(4.0)), (34.0, truth.seconds(34.0)))
    assert speed.fixed_seconds == pytest.approx(2.0) and speed.gflops == pytest.approx(40.0)
    assert speed.seconds(147.0) == pytest.approx(2.0 + 147.0 / 40.0)
    assert speed.gflops_at(147.0) == pytest.approx(147.0 / (2.0 + 147.0 / 40.0))


@pytest.mark.parametrize("short_seconds, long_seconds", [(1.0, 0.9), (1.0, 1.0), (0.01, 2.0)])
def test_noisy_passes_fall_back_to_the_long_passs_own_rate(short_seconds, long_seconds):
    speed = fit_forward_speed((4.0, short_seconds), (34.0, long_seconds))  # slope ≤ 0, or a negative fixed cost
    assert speed == ForwardSpeed(0.0, 34.0 / long_seconds)


def test_the_long_pass_must_do_more_work():
    with pytest.raises(ValueError, match="more FLOPs"):
        fit_forward_speed((4.0, 1.0), (4.0, 2.0))
