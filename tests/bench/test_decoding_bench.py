"""``txviz bench --decoding``: a plain cached decode step, the per-step record and the record with the lens,
side by side in one worker, the first token, the whole run and a branch against a run from scratch. The
worker is handed a tiny model (its loader) and a clock whose every reading adds the forward calls made
since the last one at a known cost per token, so the arithmetic and the report are tested, not timings."""

from __future__ import annotations

import json

import pytest

from tests.helpers.tiny import random_decoder, tiny_config
from txviz import cli
from txviz.bench import decoding_report, runner, worker
from txviz.bench.decoding import decoding, ratios, stream_times, summary
from txviz.cli.bench import cmd_bench
from txviz.loading.loaded import LoadedModel

PLAIN_S, RECORD_S = 0.02, 0.024  # a forward's cost per token fed, plain and recorded: 1.2× by construction


class TinyLoader:
    """A tiny random model without a tokenizer; ``forwards`` lists (kind, tokens fed) per forward call."""

    def __init__(self):
        config = tiny_config()
        self.model = random_decoder(config)
        self.forwards: list[tuple[str, int]] = []
        self.model.register_forward_pre_hook(lambda module, args, kwargs: self.forwards.append(
            ("record" if type(kwargs.get("record")).__name__ == "StepRecorder" else "plain", args[0].shape[-1])),
            with_kwargs=True)
        self.loaded = LoadedModel(model=self.model, tokenizer=None, config=config, source="tiny", format="hf")

    def ours(self, source: str) -> LoadedModel:
        return self.loaded


class ForwardClock:
    """(wall, CPU) readings that advance by the forwards run since the last reading: tokens × cost of their kind."""

    def __init__(self, loader: TinyLoader):
        self.loader, self.now, self.seen = loader, 0.0, 0

    def __call__(self) -> tuple[float, float]:
        ran, self.seen = self.loader.forwards[self.seen:], len(self.loader.forwards)
        self.now += sum((RECORD_S if kind == "record" else PLAIN_S) * tokens for kind, tokens in ran)
        return self.now, self.now / 2  # CPU half the wall: another process shares the cores


def test_the_workload_times_each_way_per_step_the_first_token_the_total_and_a_branch():
    loader, prompt, n = TinyLoader(), 16, 6
    job = {"kind": "decoding", "source": "tiny", "threads": 1, "rounds": 2, "prompt_tokens": prompt, "new_tokens": n}
    result = json.loads(json.dumps(decoding(job, loader=loader, prompt=worker.prompt, clock=ForwardClock(loader))))  # as the worker prints it
    plain, record, lens = (result["summaries"][m] for m in ("plain", "record", "record_lens"))
    assert plain["step_s"] == pytest.approx(PLAIN_S) and record["step_s"] == pytest.approx(RECORD_S)
    assert lens["step_s"] == pytest.approx(RECORD_S)  # the lens is read after the run: the steps keep the record's pace
    assert result["record_over_plain"] == pytest.approx(1.2) and result["record_over_plain_wall"] == pytest.approx(1.2)
    assert plain["first_token_s"] == pytest.approx(prompt * PLAIN_S)  # the prefill, then the first draw
    assert record["total_s"] == pytest.approx((prompt + n - 1) * RECORD_S) and record["runs"] == 2
    assert record["step_cpu_s"] == pytest.approx(RECORD_S / 2)
    assert result["attention_layers"] == loader.loaded.config.n_layers and result["same_tokens"] is True
    branch = result["branch"]
    t = branch["step"]
    assert t == n // 2 and branch["reused_tokens"] == prompt + t and branch["steps_after"] == n - t - 1
    assert branch["branch_s"] == pytest.approx((n - t - 1) * RECORD_S)  # one token per step after t, nothing before
    assert branch["branch_over_steps_after"] == pytest.approx(1.0) and branch["branch_over_steps_after_cpu"] == pytest.approx(1.0)
    assert branch["branch_cpu_s"] == pytest.approx((n - t - 1) * RECORD_S / 2)
    scratch = (prompt + t + 1 + n - t - 2) * RECORD_S  # the prefix prefilled, then the steps after t
    assert branch["scratch_s"] == pytest.approx(scratch) and branch["same_tokens"] is True


def test_the_worker_runs_the_workload_as_a_job():
    loader = TinyLoader()
    result = worker.work({"kind": "decoding", "source": "tiny", "threads": 1, "rounds": 1, "prompt_tokens": 8,
                          "new_tokens": 3}, loader=loader)
    assert result["new_tokens"] == 3 and result["threads"] == 1 and result["summaries"]["record"]["runs"] == 1


def _marks(first: float, step: float, n: int, cpu_share: float = 0.5) -> list[tuple[float, float]]:
    walls = [0.0, first] + [first + step * (i + 1) for i in range(n - 1)]
    walls.append(walls[-1] + 0.01)  # the return after the last step
    return [(w, w * cpu_share) for w in walls]


def test_ratios_are_of_the_median_later_step_and_the_first_token_is_timed_from_the_call():
    runs = {"plain": [stream_times(_marks(0.3, 0.10, 5))], "record": [stream_times(_marks(0.35, 0.13, 5))],
            "record_lens": [stream_times(_marks(0.35, 0.15, 5))]}
    summaries = {m: summary(r) for m, r in runs.items()}
    assert summaries["record"]["first_token_s"] == pytest.approx(0.35)
    assert summaries["record"]["total_s"] == pytest.approx(0.35 + 4 * 0.13 + 0.01)
    assert ratios(summaries) == pytest.approx({"record_over_plain": 1.3, "record_over_plain_wall": 1.3,
                                               "record_lens_over_plain": 1.5, "record_lens_over_plain_wall": 1.5})


def _result(record_ratio: float, first: float, total: float, quick: bool = False) -> dict:
    summaries = {m: {"step_s": 0.05 * r, "step_cpu_s": 0.04 * r, "first_token_s": first, "total_s": total,
                     "total_cpu_s": total, "runs": 3} for m, r in (("plain", 1.0), ("record", record_ratio),
                                                                  ("record_lens", record_ratio))}
    branch = {"step": 24, "token": 5, "reused_tokens": 88, "steps_after": 23, "branch_s": 1.2, "scratch_s": 1.6,
              "steps_after_s": 1.1, "branch_over_steps_after": 1.091, "branch_over_scratch": 0.75,
              "branch_cpu_s": 0.6, "scratch_cpu_s": 0.8, "steps_after_cpu_s": 0.5, "branch_over_steps_after_cpu": 1.2,
              "branch_over_scratch_cpu": 0.75, "same_tokens": True}
    return {"model": "default", "quick": quick,
            "machine": {"cpu": "AMD EPYC", "cpus": 2, "load_average_before": [1.0, 2.0, 3.0],
                        "load_average_after": [1.5, 2.0, 3.0]},
            "decoding": {"prompt_tokens": 64, "new_tokens": 48, "threads": 2, "attention_layers": 30, "candidates": 10,
                         "summaries": summaries, **ratios(summaries), "same_tokens": True, "branch": branch}}


def test_the_report_names_the_machine_and_judges_each_target():
    met = _result(1.2, 0.3, 4.0)
    table = decoding_report.markdown(met)
    assert "Machine: AMD EPYC, 2 cores, 2 torch threads; load average (1/5/15 min) 1.00/2.00/3.00 → 1.50/2.00/3.00" in table
    assert "| full per-step record (decode) | 0.0600 | 0.0480 | 1.20× | 1.20× | 0.300 | 4.00 | 3 |" in table
    lines = decoding_report.judge(met)
    assert lines[0] == "full record / plain step (CPU): 1.20× (target ≤ 1.25×) met"
    assert all(line.endswith(" met") for line in lines) and len(lines) == 5
    missed = decoding_report.judge(_result(1.5, 0.7, 7.0))
    assert [line.rsplit(" ", 1)[-1] for line in missed] == ["MISSED", "MISSED", "MISSED", "MISSED", "met"]
    assert all(line.endswith("not judged") for line in decoding_report.judge(_result(1.5, 0.7, 7.0, quick=True)))


def test_txviz_bench_decoding_runs_the_workload_and_prints_its_report(capsys):
    asked = {}

    def decode_run(**options):
        asked.update(options)
        return _result(1.2, 0.3, 4.0)

    args = cli.build_parser().parse_args(["bench", "--decoding", "--repeats", "4", "--threads", "2"])
    result = cmd_bench(args, run=lambda *a, **k: pytest.fail("the forward benchmark ran"), decode_run=decode_run)
    assert result["decoding"]["record_over_plain"] == pytest.approx(1.2)
    assert asked["rounds"] == 4 and asked["threads"] == 2 and asked["new_tokens"] is None and asked["quick"] is False
    assert "Decoding on default: 48 new tokens after a 64-token prompt" in capsys.readouterr().out


def test_the_runner_spawns_one_decoding_job_and_names_the_machine():
    jobs = []
    result = runner.run_decoding(rounds=2, threads=1, spawn=lambda job: jobs.append(job) or {"new_tokens": 48})
    (job,) = jobs
    assert job["kind"] == "decoding" and job["source"] == "default" and job["rounds"] == 2 and job["new_tokens"] == 48
    assert job["prompt_tokens"] == 64 and result["machine"]["cpus"] >= 1 and "load_average_after" in result["machine"]
    assert result["machine"]["cpu"] == runner.cpu_model()
