"""``txviz bench`` gives short calls more rounds: a method is timed until its samples add up to
MIN_SAMPLED_S (at most MAX_ROUNDS rounds), long ones keep the asked ``repeats``."""

from __future__ import annotations

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
        return seconds[ran[-1]], seconds[ran[-1]]

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
