"""``txviz bench`` gives short calls more rounds: a method is timed until its samples add up to
MIN_SAMPLED_S (at most MAX_ROUNDS rounds), long ones keep the asked ``repeats``."""

from __future__ import annotations

import pytest
import torch

from txviz import bench


def test_rounds_go_on_while_any_method_has_been_timed_too_briefly():
    short, long = [0.2] * 3, [2.0] * 3
    assert bench._needs_more({"plain": short, "trace": long}, rounds=3)  # 0.6 s of plain: not enough
    assert not bench._needs_more({"plain": long, "trace": long}, rounds=3)
    assert not bench._needs_more({"plain": short, "trace": short}, rounds=bench.MAX_ROUNDS)  # capped


def test_a_timing_worker_takes_rounds_until_each_method_is_sampled_enough(monkeypatch):
    calls, seconds = {"plain": 0, "trace": 0}, {"plain": 0.02, "trace": 0.05}
    ran = []

    def method(name):
        def run():
            calls[name] += 1
            ran.append(name)
        return run

    def measure(function):  # each call "takes" its method's seconds: no sleep, no clock to overshoot
        function()
        return seconds[ran[-1]], seconds[ran[-1]], 0

    monkeypatch.setattr(bench, "MIN_SAMPLED_S", 0.3)
    monkeypatch.setattr(bench, "_measure", measure)
    monkeypatch.setattr(bench, "_load_ours", lambda source: type("Loaded", (), {"tokenizer": None})())
    monkeypatch.setattr(bench, "_skips", lambda job, loaded: {"hf": "not in this test"})
    monkeypatch.setattr(bench, "_prompt", lambda loaded, n: torch.zeros(1, n, dtype=torch.long))
    monkeypatch.setattr(bench, "_methods", lambda loaded, hf, ids: {"plain": method("plain"), "trace": method("trace")})
    monkeypatch.setattr(bench, "_rebuild_latency", lambda tr, repeats: {})
    timing = bench._timing({"source": "x", "tokens": 8, "repeats": 2, "hf": False})
    # plain's 0.02 s calls add up to 0.3 s after 15 rounds (float sums: 15 or 16); trace's 0.05 s after 6
    assert timing["rounds"] in (15, 16)
    assert calls["plain"] == timing["rounds"] + 1  # + its warm-up call
    assert calls["trace"] == timing["rounds"] + 2  # + its warm-up and the trace the rebuild latency reads


def test_rounds_go_on_while_the_per_round_ratios_spread_wide(monkeypatch):
    monkeypatch.setattr(bench, "MAX_SPREAD_S", 20.0)
    plain = [2.0, 2.0, 2.0]
    steady, jumpy = [2.2, 2.2, 2.2], [2.0, 2.6, 2.2]  # ratios 1.1 each round / 1.0 … 1.3
    assert bench._spread(steady, plain) == 0.0
    assert bench._spread(jumpy, plain) == pytest.approx(0.3 / 1.1)
    assert not bench._needs_more({"plain": plain, "trace": steady}, 3, {"plain": plain, "trace": steady})
    assert bench._needs_more({"plain": plain, "trace": jumpy}, 3, {"plain": plain, "trace": jumpy})
    long = [8.0] * 3  # 24 s sampled: past MAX_SPREAD_S, however wide
    assert not bench._needs_more({"plain": long, "trace": long}, 3, {"plain": plain, "trace": jumpy})
    # from four rounds on the interquartile range: one outlier round does not keep it going
    plain5, one_outlier = [2.0] * 5, [2.2, 2.2, 2.2, 2.2, 3.0]
    assert bench._spread(one_outlier, plain5) == pytest.approx(0.0)
    assert bench._spread([0.0, 0.0, 0.0], [7e-6, 1e-6, 2e-6]) == 0.0  # too fast to time: no spread, no division by 0


def test_transformers_over_trace_is_the_quotient_of_two_workers_ratios():
    """trace/plain from the trace worker, hf/plain from the transformers worker: each over its own
    plain forward, so a slower plain forward beside transformers does not flatter the trace."""
    def worker(methods, seconds, faults):
        table = {m: seconds[m] for m in methods}
        return {"seconds": {m: table.get(m) for m in bench.METHODS}, "best_seconds": table, "cpu_seconds": table,
                "minflt": {m: faults[m] for m in methods}, "ratio_spread": {m: 0.01 for m in methods if m != "plain"},
                "rounds": 3, "skipped": {}, "latency": {}, "ids": [1, 2], "threads": 1}

    traced = worker(("plain", "trace"), {"plain": 2.0, "trace": 2.2}, {"plain": 10, "trace": 20})
    beside_hf = worker(("plain", "hf"), {"plain": 2.5, "hf": 5.0}, {"plain": 3000, "hf": 300000})
    row = bench._result_row(1024, bench._merge_timings(traced, beside_hf), {})
    assert row["plain_forward_s"] == 2.0 and row["plain_beside_hf_s"] == 2.5
    assert row["trace_over_plain"] == pytest.approx(1.1) and row["hf_over_plain"] == pytest.approx(2.0)
    assert row["hf_over_trace"] == pytest.approx(2.0 / 1.1, abs=1e-3)  # not 5.0 / 2.2
    assert row["minflt"] == {"plain": 10, "trace": 20, "hf": 300000, "plain_beside_hf": 3000}
    from txviz.bench.targets import cpu_ratio
    assert cpu_ratio(row, "hf", "trace") == pytest.approx(2.0 / 1.1)
    alone = bench._result_row(1024, bench._merge_timings(traced, None), {})
    assert alone["hf_over_trace"] is None and alone["trace_over_plain"] == pytest.approx(1.1)


def test_the_trace_worker_loads_no_transformers_model(monkeypatch):
    def refuse(source):
        raise AssertionError("transformers loaded in the trace worker")

    monkeypatch.setattr(bench, "_load_hf", refuse)
    monkeypatch.setattr(bench, "_load_ours", lambda source: type("Loaded", (), {"tokenizer": None})())
    monkeypatch.setattr(bench, "_skips", lambda job, loaded: {})  # transformers would fit and is installed
    monkeypatch.setattr(bench, "_prompt", lambda loaded, n: torch.zeros(1, n, dtype=torch.long))
    monkeypatch.setattr(bench, "_methods", lambda loaded, hf, ids: {"plain": lambda: None, "trace": lambda: None})
    monkeypatch.setattr(bench, "_rebuild_latency", lambda tr, repeats: {})
    monkeypatch.setattr(bench, "MIN_SAMPLED_S", 0.0)
    monkeypatch.setattr(bench, "MAX_SPREAD_S", 0.0)  # calls of nothing: their ratios are noise
    timing = bench._timing({"source": "x", "tokens": 8, "repeats": 2, "hf": True, "methods": ["plain", "trace"]})
    assert set(timing["cpu_seconds"]) == {"plain", "trace"} and timing["rounds"] == 2
