"""``txviz bench --quick``: the whole benchmark (timing, per-process peak memory, decoding, the transformers
reference) on a tiny random Llama, so it cannot rot; and the memory guard that skips instead of crashing.

The quick run's workers run in the test's process (each job and result through JSON, as between processes)
except one, started as ``python -m txviz.bench JOB`` like all of them in a real run: that checks the worker
entry point, and saves four interpreter starts importing torch and transformers (most of the run's time)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.helpers.expected import SMOLLM2_135M
from txviz import bench, cli


def test_quick_bench_runs_end_to_end(capsys, monkeypatch):
    pytest.importorskip("transformers")
    spawned, real_spawn = [], bench._spawn

    def spawn(job: dict) -> dict:
        if job["kind"] == "memory" and job["method"] == "plain":  # the lightest worker: no transformers
            spawned.append(job)
            return real_spawn(job)
        return json.loads(json.dumps(bench._worker(json.loads(json.dumps(job)))))

    monkeypatch.setattr(bench, "_spawn", spawn)
    assert cli.main(["bench", "--quick", "--json", "--threads", "1", "--decode-tokens", "4"]) == 0
    result = json.loads(capsys.readouterr().out)
    (row,) = result["results"]
    assert row["tokens"] == 64 and row["skipped"] == {}
    for key in ("plain_forward_s", "trace_s", "hf_eager_attn_s", "peak_rss_mb", "plain_peak_rss_mb", "hf_peak_rss_mb"):
        assert row[key] > 0, key
    assert row["trace_over_plain"] == pytest.approx(row["trace_s"] / row["plain_forward_s"], rel=1e-2)
    decode = result["decode"]
    assert decode["new_tokens"] == 4 and decode["txviz_tok_s"] > 0 and decode["hf_tok_s"] > 0
    assert decode["same_tokens"] is True  # greedy on the same weights: the same continuation
    table = bench.markdown(result)
    assert table.startswith("| tokens |") and "| 64 |" in table and "same tokens: True" in table
    assert len(spawned) == 1  # one worker process, its result read back from its stdout


def test_methods_that_would_not_fit_are_skipped_with_the_estimate(monkeypatch):
    psutil = pytest.importorskip("psutil")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=20 * 2**30))
    loaded = SimpleNamespace(config=SMOLLM2_135M, n_params=134_515_008)
    job = {"tokens": 8192, "hf": True}
    skipped = bench._skips(job, loaded)
    assert set(skipped) == {"hf"} and "GiB available" in skipped["hf"]  # 72 GB of maps; the trace fits
    assert bench._skips({**job, "tokens": 1024}, loaded) == {}
    assert set(bench._skips({"tokens": 1024, "hf": False}, loaded)) == {"hf"}
