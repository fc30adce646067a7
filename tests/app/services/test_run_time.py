"""How long a run will take (app/services/run_time.py): one batch of the run's own work unit timed here
now, per sequence, times the run's passes, times a factor the last runs measured; and the time left
while it runs, moved from the estimate to the pace of the batches done."""

import itertools

import pytest
import torch

from app.services import run_time
from txviz import threads


def test_the_factor_is_the_median_of_the_last_five_runs_else_the_first_measured():
    assert run_time.ratio(None, "causal") == run_time.FIRST_RATIO["causal"]
    kept = None
    for seconds in (10.0, 12.0, 30.0, 11.0, 9.0, 10.0):  # 100 passes of 0.1 s each alone: factors 1.0, 1.2, 3.0, …
        kept = run_time.kept_ratios(kept, seconds, passes=100, one_pass=0.1)
    assert kept == pytest.approx((1.2, 3.0, 1.1, 0.9, 1.0))  # the first run is no longer kept
    assert run_time.ratio(kept, "causal") == pytest.approx(1.1)  # one slow run does not set it


def _fake_clock(call_seconds, cpu_share=1.0):
    """A clock whose consecutive start/stop readings are ``call_seconds`` apart in wall time and ``cpu_share``
    of that in CPU time, one pair per call."""
    readings = itertools.chain.from_iterable(((10.0 * i, 5.0 * i), (10.0 * i + s, 5.0 * i + s * cpu_share))
                                             for i, s in enumerate(call_seconds))
    return lambda: next(readings)


def test_a_unit_is_one_batch_as_the_run_makes_it_under_its_thread_rule_per_sequence(tiny, monkeypatch):
    seen = []
    forward = tiny.model.forward
    monkeypatch.setattr(threads, "others_running", lambda: 99.0)
    monkeypatch.setattr(tiny.model, "forward",
                        lambda ids, *a, **k: seen.append((tuple(ids.shape), torch.get_num_threads(), k.get("record")))
                        or forward(ids, *a, **k))
    unit = run_time.WorkUnit(batch=16)
    seconds = run_time.unit_seconds(tiny, 12, unit, repeats=3, clock=_fake_clock([3.2, 4.8, 1.6]),
                                    slowdown=lambda threads: 1.0)
    assert seconds == pytest.approx(3.2 / 16)  # the median batch, per sequence
    assert [(shape, n_threads) for shape, n_threads, _ in seen] == [((16, 12), 1)] * 3
    assert all(record is None for *_, record in seen)  # the causal sweeps' unit: plain forwards


def test_the_coreference_unit_traces_its_maps_as_the_run_does(tiny, monkeypatch):
    seen = []
    forward = tiny.model.forward
    monkeypatch.setattr(tiny.model, "forward",
                        lambda ids, *a, **k: seen.append((tuple(ids.shape), k.get("record"))) or forward(ids, *a, **k))
    unit = run_time.RUN_UNITS["coref"]
    run_time.unit_seconds(tiny, 9, unit, repeats=1, clock=_fake_clock([1.0]), slowdown=lambda threads: 1.0)
    (shape, record), = seen
    assert shape == (unit.batch, 9) and unit.batch > 1
    assert record.layer(0).wants("attn_probs")  # the maps the set's scoring reads, as it captures them


def test_on_a_busy_machine_the_unit_is_its_cpu_seconds_times_the_runs_share_of_the_cores(tiny, monkeypatch):
    """A short sample gets the cores first for a moment (the scheduler's credit for sleeping) and reads short
    of the run it stands for: where the load says a run would be slower than the sample, the load decides."""
    asked = []

    def slowdown(threads):
        asked.append(threads)
        return 4.5

    monkeypatch.setattr(threads, "others_running", lambda: 99.0)  # the run's thread rule: one thread
    unit = run_time.WorkUnit(batch=4)
    busy = run_time.unit_seconds(tiny, 6, unit, repeats=3, clock=_fake_clock([2.0, 2.0, 2.0], cpu_share=0.5),
                                 slowdown=slowdown)
    assert busy == pytest.approx(1.0 * 4.5 / 4) and asked == [1]  # CPU 1 s a batch, 4.5× slower under this load
    quiet = run_time.unit_seconds(tiny, 6, unit, repeats=3, clock=_fake_clock([2.0, 2.0, 2.0], cpu_share=0.5),
                                  slowdown=lambda threads: 1.0)
    assert quiet == pytest.approx(2.0 / 4)  # the wall time, where the load adds nothing to it


def test_the_load_slowdown_is_the_fair_share_of_the_cores_when_they_are_oversubscribed(monkeypatch):
    monkeypatch.setattr(run_time, "others_running", lambda: 0.0)
    monkeypatch.setattr(run_time.os, "getloadavg", lambda: (8.0 + run_time.PROCESS_THREADS, 0.0, 0.0))
    monkeypatch.setattr(run_time.os, "cpu_count", lambda: 2)
    assert run_time.load_slowdown(1) == pytest.approx((8 + 1) / 2)  # 9 runnable tasks on 2 cores
    monkeypatch.setattr(run_time.os, "getloadavg", lambda: (0.5, 0.0, 0.0))
    assert run_time.load_slowdown(2) == 1.0  # free cores: no slowdown


def test_the_time_left_starts_at_the_estimate_and_moves_to_the_pace_of_the_batches_done():
    left = run_time.remaining_seconds
    assert left(20.0, 0.0, 0.0) == pytest.approx(20.0)
    assert left(20.0, 30.0, 1.0) == 0.0
    # a run twice as slow as estimated: half done after 20 s of an estimated 20
    slow = [left(20.0, 40.0 * f, f) for f in (0.1, 0.25, 0.5, 0.75, 0.9)]
    truth = [40.0 * (1 - f) for f in (0.1, 0.25, 0.5, 0.75, 0.9)]
    naive = [max(20.0 - 40.0 * f, 0.0) for f in (0.1, 0.25, 0.5, 0.75, 0.9)]  # the estimate less the time spent
    errors = [abs(s - t) / t for s, t in zip(slow, truth)]
    assert errors == sorted(errors, reverse=True) and errors[-1] < 0.15  # closer and closer to the truth
    assert all(abs(s - t) < abs(n - t) for s, n, t in zip(slow, naive, truth))
    # a run exactly as estimated is told the estimate's own remainder all along
    assert [left(20.0, 20.0 * f, f) for f in (0.2, 0.6)] == pytest.approx([16.0, 8.0])
    # time passing with nothing done says more is left, not less
    assert left(20.0, 5.0, 0.0) > left(20.0, 0.0, 0.0)
    assert left(None, 5.0, 0.0) is None and left(None, 5.0, 0.25) == pytest.approx(15.0)
