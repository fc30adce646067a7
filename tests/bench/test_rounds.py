"""``txviz bench`` gives short calls more rounds: a method is timed until its samples add up to
``min_sampled_s`` (at most ``max_rounds`` rounds), long ones keep the asked ``repeats``. The timing worker
is handed a tiny model (its loader), a clock and the sampling rule, so no test replaces a module's names."""

from __future__ import annotations

import pytest

from tests.helpers.tiny import random_decoder, tiny_config
from txviz.bench import runner
from txviz.bench.rounds import SAMPLING, Sampling, needs_more, spread
from txviz.bench.worker import METHODS, timing
from txviz.loading.loaded import LoadedModel


class TinyLoader:
    """A tiny random model without a tokenizer for txviz; transformers' model refused (these workers must
    not need it). ``forwards`` lists, per forward of the model, whether it was traced or plain."""

    def __init__(self):
        config = tiny_config()
        self.model = random_decoder(config)
        self.forwards: list[str] = []
        self.model.register_forward_pre_hook(
            lambda module, args, kwargs: self.forwards.append("trace" if kwargs.get("record") else "plain"),
            with_kwargs=True)
        self.loaded = LoadedModel(model=self.model, tokenizer=None, config=config, source="tiny", format="hf")

    def ours(self, source: str) -> LoadedModel:
        return self.loaded

    def hf(self, source: str):
        raise AssertionError("transformers loaded in the trace worker")


def test_rounds_go_on_while_any_method_has_been_timed_too_briefly():
    short, long = [0.2] * 3, [2.0] * 3
    assert needs_more({"plain": short, "trace": long}, rounds=3)  # 0.6 s of plain: not enough
    assert not needs_more({"plain": long, "trace": long}, rounds=3)
    assert not needs_more({"plain": short, "trace": short}, rounds=SAMPLING.max_rounds)  # capped


def test_a_timing_worker_takes_rounds_until_each_method_is_sampled_enough():
    loader, seconds = TinyLoader(), {"plain": 0.02, "trace": 0.05}

    def clock(function):  # each call "takes" its method's seconds: no sleep, no clock to overshoot
        before = len(loader.forwards)
        function()
        ran = loader.forwards[before:]
        taken = seconds[ran[-1]] if ran else 0.001  # a map rebuilt from the trace runs no forward
        return taken, taken, 0

    timing_ = timing({"source": "x", "tokens": 8, "repeats": 2, "hf": False}, loader=loader, clock=clock,
                     sampling=Sampling(min_sampled_s=0.3))
    assert timing_["skipped"] == {"hf": "transformers not installed or --no-hf"}
    # plain's 0.02 s calls add up to 0.3 s after 15 rounds (float sums: 15 or 16); trace's 0.05 s after 6
    assert timing_["rounds"] in (15, 16)
    assert timing_["seconds"] == {"plain": 0.02, "trace": 0.05, "hf": None}
    assert loader.forwards.count("plain") == timing_["rounds"] + 1  # + its warm-up call
    assert loader.forwards.count("trace") == timing_["rounds"] + 2  # + its warm-up and the trace the rebuild latency reads


def test_rounds_go_on_while_the_per_round_ratios_spread_wide():
    sampling = Sampling(max_spread_s=20.0)
    plain = [2.0, 2.0, 2.0]
    steady, jumpy = [2.2, 2.2, 2.2], [2.0, 2.6, 2.2]  # ratios 1.1 each round / 1.0 … 1.3
    assert spread(steady, plain) == 0.0
    assert spread(jumpy, plain) == pytest.approx(0.3 / 1.1)
    assert not needs_more({"plain": plain, "trace": steady}, 3, {"plain": plain, "trace": steady}, sampling)
    assert needs_more({"plain": plain, "trace": jumpy}, 3, {"plain": plain, "trace": jumpy}, sampling)
    long = [8.0] * 3  # 24 s sampled: past MAX_SPREAD_S, however wide
    assert not needs_more({"plain": long, "trace": long}, 3, {"plain": plain, "trace": jumpy}, sampling)
    # from four rounds on the interquartile range: one outlier round does not keep it going
    plain5, one_outlier = [2.0] * 5, [2.2, 2.2, 2.2, 2.2, 3.0]
    assert spread(one_outlier, plain5) == pytest.approx(0.0)
    assert spread([0.0, 0.0, 0.0], [7e-6, 1e-6, 2e-6]) == 0.0  # too fast to time: no spread, no division by 0


def test_transformers_over_trace_is_the_quotient_of_two_workers_ratios():
    """trace/plain from the trace worker, hf/plain from the transformers worker: each over its own
    plain forward, so a slower plain forward beside transformers does not flatter the trace."""
    def worker(methods, seconds, faults):
        table = {m: seconds[m] for m in methods}
        return {"seconds": {m: table.get(m) for m in METHODS}, "best_seconds": table, "cpu_seconds": table,
                "minflt": {m: faults[m] for m in methods}, "ratio_spread": {m: 0.01 for m in methods if m != "plain"},
                "rounds": 3, "skipped": {}, "latency": {}, "ids": [1, 2], "threads": 1}

    traced = worker(("plain", "trace"), {"plain": 2.0, "trace": 2.2}, {"plain": 10, "trace": 20})
    beside_hf = worker(("plain", "hf"), {"plain": 2.5, "hf": 5.0}, {"plain": 3000, "hf": 300000})
    row = runner.result_row(1024, runner.merge_timings(traced, beside_hf), {})
    assert row["plain_forward_s"] == 2.0 and row["plain_beside_hf_s"] == 2.5
    assert row["trace_over_plain"] == pytest.approx(1.1) and row["hf_over_plain"] == pytest.approx(2.0)
    assert row["hf_over_trace"] == pytest.approx(2.0 / 1.1, abs=1e-3)  # not 5.0 / 2.2
    assert row["minflt"] == {"plain": 10, "trace": 20, "hf": 300000, "plain_beside_hf": 3000}
    from txviz.bench.targets import cpu_ratio
    assert cpu_ratio(row, "hf", "trace") == pytest.approx(2.0 / 1.1)
    alone = runner.result_row(1024, runner.merge_timings(traced, None), {})
    assert alone["hf_over_trace"] is None and alone["trace_over_plain"] == pytest.approx(1.1)


def test_the_trace_worker_loads_no_transformers_model():
    loader = TinyLoader()  # transformers would fit, and is asked for by the job: only the methods name it not
    timing_ = timing({"source": "x", "tokens": 8, "repeats": 2, "hf": True, "methods": ["plain", "trace"]},
                     loader=loader, sampling=Sampling(min_sampled_s=0.0, max_spread_s=0.0))  # tiny calls: noise
    assert set(timing_["cpu_seconds"]) == {"plain", "trace"} and timing_["rounds"] == 2 and timing_["skipped"] == {}
