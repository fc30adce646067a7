"""``txviz bench --quick``: the whole benchmark (timing, per-process peak memory, decoding, the transformers
reference) on a tiny random Llama, so it cannot rot; and the memory guard that skips instead of crashing.

The quick run's workers run in the test's process (each job and result through JSON, as between processes)
except one, started as ``python -m txviz.bench.worker JOB`` like all of them in a real run: that checks the
worker entry point, and saves four interpreter starts importing torch and transformers (most of the run's
time). The benchmark takes where its jobs run (``spawn``) as a parameter, and the command takes the benchmark
(``run``), so no test replaces a module's names."""

from __future__ import annotations

import functools
import json
from types import SimpleNamespace

import pytest

from tests.helpers.expected import SMOLLM2_135M
from tests.helpers.hf_reference import needs_transformers
from txviz import cli
from txviz.bench import report, runner, worker
from txviz.cli.bench import cmd_bench


@needs_transformers
def test_quick_bench_runs_end_to_end():
    pytest.importorskip("transformers")
    spawned, kinds = [], {}

    def spawn(job: dict) -> dict:
        kinds.setdefault(job["kind"], job)
        if job["kind"] == "memory" and job["method"] == "plain":  # the lightest worker: no transformers
            spawned.append(job)
            return runner.spawn_worker(job)
        return json.loads(json.dumps(worker.work(json.loads(json.dumps(job)))))

    args = cli.build_parser().parse_args(["bench", "--quick", "--json", "--threads", "1", "--decode-tokens", "4"])
    result = json.loads(json.dumps(cmd_bench(args, run=functools.partial(runner.run, spawn=spawn))))
    (row,) = result["results"]
    assert row["tokens"] == 64 and row["skipped"] == {}
    for key in ("plain_forward_s", "trace_s", "hf_eager_attn_s", "peak_rss_mb", "plain_peak_rss_mb", "hf_peak_rss_mb"):
        assert row[key] > 0, key
    assert row["trace_over_plain"] == pytest.approx(row["trace_s"] / row["plain_forward_s"], rel=1e-2)
    # transformers was timed beside its own plain forward, in its own worker: hf/trace is the quotient of the ratios
    assert row["plain_beside_hf_s"] > 0 and set(row["minflt"]) == {"plain", "trace", "hf", "plain_beside_hf"}
    assert row["hf_over_trace"] == pytest.approx(row["hf_eager_attn_s"] / row["plain_beside_hf_s"]
                                                 / row["trace_over_plain"], rel=2e-2)
    decode = result["decode"]
    assert decode["new_tokens"] == 4 and decode["txviz_tok_s"] > 0 and decode["hf_tok_s"] > 0
    assert decode["same_tokens"] is True  # greedy on the same weights: the same continuation
    table = report.markdown(result)
    assert table.startswith("| tokens |") and "| 64 |" in table and "same tokens: True" in table
    assert "HF / trace = (HF / plain) ÷ (trace / plain)" in table
    assert len(spawned) == 1  # one worker process, its result read back from its stdout
    parts = row["attention_parts"]  # quick runs the breakdown a missed target gets, so it cannot rot
    assert parts["tokens"] == 64 and parts["n_layers"] == 2 and parts["fused_s"] > 0
    assert parts["traced_s"] >= parts["softmax_s"] and parts["products_s"] > 0
    assert "Targets, on the CPU-second ratios" in table and "trace / plain forward at 64 tokens" in table
    # a tiny random model is not judged against the real model's targets, and its layer
    # breakdown gets more than --quick's one repeat (one timed a cold kernel)
    assert result["quick"] is True and "not judged under --quick" in table and "MISSED" not in table
    assert kinds["attention"]["repeats"] == runner.ATTENTION_REPEATS and kinds["timing"]["repeats"] == 1


def _row(tokens, plain, trace, hf=None, parts=None):
    return {"tokens": tokens, "cpu_s": {"plain": plain, "trace": trace, "hf": hf}, "attention_parts": parts}


def test_targets_say_met_or_missed_and_a_miss_says_what_bounds_it():
    from txviz.bench.targets import judge

    parts = {"layer": 0, "tokens": 4096, "fused_s": 0.2, "traced_s": 0.6, "products_s": 0.2, "softmax_s": 0.15,
             "summaries_s": 0.25, "n_layers": 30}
    lines = judge({"results": [_row(1024, 2.0, 2.1, hf=3.8), _row(4096, 25.0, 35.0, parts=parts)]})
    assert lines[0] == "trace / plain forward at 1024 tokens: 1.05× (target ≤ 1.1×) met"
    assert lines[1].startswith("transformers eager + attentions / trace at 1024 tokens: 1.81× (target ≥ 2.0×) MISSED")
    assert "1.90× our plain forward" in lines[2] and "0.95× the plain forward" in lines[2]
    assert lines[3].startswith("trace / plain forward at 4096 tokens: 1.40×") and lines[3].endswith("MISSED")
    assert "fused kernel 200.0; traced 600.0 (3.00×)" in lines[4] and "12.00 s more" in lines[4]
    # products 0.2 + softmax 0.15 − fused 0.2 = 0.15 s a layer, 4.50 s over 30: ≥ 1 + 4.5 / 25 = 1.18× however cheap the summaries
    assert "alone, with no summary at all, are 4.50 s (a trace at ≥ 1.18× the plain forward)" in lines[4]
    assert len(lines) == 5


def test_methods_that_would_not_fit_are_skipped_with_the_estimate(monkeypatch):
    psutil = pytest.importorskip("psutil")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=20 * 2**30))
    loaded = SimpleNamespace(config=SMOLLM2_135M, n_params=134_515_008)
    job = {"tokens": 8192, "hf": True}
    skipped = worker.skips(job, loaded)
    assert set(skipped) == {"hf"} and "GiB available" in skipped["hf"]  # 72 GB of maps; the trace fits
    assert worker.skips({**job, "tokens": 1024}, loaded) == {}
    assert set(worker.skips({"tokens": 1024, "hf": False}, loaded)) == {"hf"}


@pytest.mark.parametrize("flag, value", [("--tokens", "-5"), ("--tokens", "0"), ("--repeats", "0"),
                                         ("--decode-tokens", "0"), ("--threads", "-1"), ("--tokens", "x"),
                                         ("--tokens", "1000000000"), ("--tokens", "1e9"),
                                         ("--tokens", "131073")])
def test_bad_counts_are_refused_at_parse_time(capsys, flag, value):
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["bench", "--quick", flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}:" in capsys.readouterr().err


def _handed(argv: list[str]) -> dict:
    """What ``txviz bench --json …`` hands the benchmark: its lengths and options."""
    handed = {}
    cmd_bench(cli.build_parser().parse_args(["bench", "--json", *argv]),
              run=lambda tokens, **options: handed.update(options, tokens=tokens) or {})
    return handed


def test_explicit_counts_are_honoured_under_quick():
    handed = _handed(["--quick", "--repeats", "2", "--decode-tokens", "3", "--tokens", "16"])
    assert (handed["tokens"], handed["repeats"], handed["decode_tokens"]) == ([16], 2, 3)
    handed = _handed(["--quick"])
    assert (handed["tokens"], handed["repeats"], handed["decode_tokens"]) == (runner.QUICK_TOKENS, 1, 8)


@pytest.mark.parametrize("argv, model", [([], None), (["--model", "default"], "default"),
                                         (["--model", "smollm2-135m"], "default")])
def test_quick_runs_the_named_model(argv, model):
    handed = _handed(["--quick", *argv])
    assert handed["model"] == model and handed["quick"]  # None: the tiny random model


def test_quick_names_the_model_it_ran(tmp_path):
    sources = []

    def spawn(job):
        sources.append(job["source"])
        raise RuntimeError("stop after the first job")

    for model, expected in ((None, "tiny"), ("default", "default"), (str(tmp_path), str(tmp_path))):
        with pytest.raises(RuntimeError):
            runner.run((16,), quick=True, model=model, hf=False, spawn=spawn, tiny_checkpoint=lambda directory: "tiny")
        assert sources.pop() == expected


def test_a_quick_result_is_not_judged_against_the_real_model_s_targets():
    from txviz.bench.targets import judge

    parts = {"layer": 0, "tokens": 1024, "fused_s": 0.0001, "traced_s": 0.0002, "products_s": 0.0001,
             "softmax_s": 0.00005, "summaries_s": 0.00005, "n_layers": 2}
    result = {"quick": True, "results": [_row(1024, 2.0, 7.0, hf=3.0, parts=parts)]}
    lines = judge(result)
    assert [line.split(") ")[-1] for line in lines if not line.startswith("  ")] == [
        "not judged: the targets are for real models, and --quick runs a tiny random one"] * 2
    assert "MISSED" not in "\n".join(lines) and lines[1].startswith("  what bounds it: 1024 tokens")
    assert "MISSED" in "\n".join(judge({**result, "quick": False}))


def test_a_layer_bound_above_the_measured_ratio_is_called_disturbed_not_a_bound():
    from txviz.bench.attention import describe

    # a cold run seen once: the layer's parts (another process) imply more than the whole measured excess
    cold = {"layer": 0, "tokens": 64, "fused_s": 0.0033, "traced_s": 0.00866, "products_s": 0.00654,
            "softmax_s": 0.00368, "summaries_s": 0.0, "n_layers": 2}
    said = describe(cold, 0.0008, 0.0030)
    assert "≥" not in said and "accounts for" not in said
    assert "more than the whole trace's 2.20 ms over the plain forward measured beside it (3.75×)" in said
    assert "was disturbed" in said
    warm = {**cold, "fused_s": 0.00002, "traced_s": 0.00005, "products_s": 0.00002, "softmax_s": 0.00002}
    # three figures for small times: it read '0.0 ms'
    assert "alone, with no summary at all, are 0.040 ms (a trace at ≥ 1.05× the plain forward)" in \
        describe(warm, 0.0008, 0.0031)
    noisy = describe(cold, 0.0008, 0.0006)  # the trace measured faster than the plain forward: no negative excess
    assert "more than the trace measured beside the plain forward, which was no slower than it (0.75×)" in noisy
