"""The RoPE-scaling tab's time estimate (app.services.positions.forward_speed) on a machine whose passes
cost a fixed time plus their FLOPs at a rate (a fake clock, no timing): the probe counts the work of
the passes it timed, and its estimate of a longer pass is that pass's cost, where a rate read from one
short pass (the old probe) was several times too slow."""

from __future__ import annotations

import pytest

from app.services import positions
from txviz.analysis.positions import measured

FIXED, RATE, COLD = 2.0, 40.0, 5.0  # seconds a pass, GFLOP/s on top, the first pass's paging


@pytest.fixture
def fake_machine(tiny, monkeypatch):
    """Every token_losses pass advances a clock by FIXED + its GFLOPs / RATE (the first by COLD more)."""
    clock, timed = [0.0], []

    def token_losses(model, ids):
        timed.append(len(ids))
        clock[0] += FIXED + positions.forward_seconds(tiny, len(ids), 1.0) / RATE + (COLD if len(timed) == 1 else 0)

    monkeypatch.setattr(measured, "token_losses", token_losses)
    monkeypatch.setattr(positions.time, "perf_counter", lambda: clock[0])
    return timed


def test_the_estimate_of_a_longer_pass_is_what_it_costs(tiny, fake_machine):
    speed = positions.forward_speed(tiny, sizes=(16, 64), repeats=2)
    assert sorted(set(fake_machine)) == [16, 64] and len(fake_machine) == 4  # the lengths whose FLOPs it counted
    assert speed.fixed_seconds == pytest.approx(FIXED) and speed.gflops == pytest.approx(RATE)
    gflop = positions.forward_seconds(tiny, 120, 1.0)
    assert positions.scaling_seconds(tiny, 120, speed) == pytest.approx(FIXED + gflop / RATE)
    one_pass_rate = positions.forward_seconds(tiny, 64, 1.0) / (FIXED + positions.forward_seconds(tiny, 64, 1.0) / RATE)
    assert gflop / one_pass_rate > 1.5 * (FIXED + gflop / RATE)  # what the old probe said: far off


def test_forward_gflops_is_the_rate_a_pass_of_that_length_shows(tiny, fake_machine):
    gflop = positions.forward_seconds(tiny, 64, 1.0)
    assert positions.forward_gflops(tiny, n_tokens=64, repeats=2) == pytest.approx(gflop / (FIXED + gflop / RATE))
