"""``txviz bench --peer transformer-lens``: the report's arithmetic (medians, spreads, ratios, verdicts),
the rounds' alternation and memory skips, the worker's txviz sides on a tiny model, and the clear
one-line refusal when TransformerLens cannot be imported. No figure here is a timing."""

from __future__ import annotations

import functools
import json
import sys

import pytest

from tests.helpers.tiny import random_decoder, tiny_config
from txviz import cli
from txviz.bench import peer, peer_lens, peer_report, peer_worker
from txviz.cli.bench import cmd_bench


def _runs(side, walls, peaks, cpus=None):
    cpus = cpus or walls
    return [{"side": side, "wall_s": w, "cpu_s": c, "peak_rss_mb": p, "threads": 2} for w, c, p in zip(walls, cpus, peaks)]


def _result(rows):
    return {"peer": peer.PEER, "repeats": 3, "maps": "fp16-packed", "rows": rows,
            "machine": {"cpu": "Test CPU", "cpus": 2, "threads": None, "load_average_start": [1.0, 2.0, 3.0],
                        "load_average_end": [1.5, 2.0, 3.0], "available_gb": 20.0}}


def test_report_takes_medians_spreads_and_ratios():
    maps = {"tokens": 1024, "workload": "maps", "skipped": {},
            "runs": {"txviz": _runs("txviz", [2.0, 1.0, 9.0], [900, 1000, 1100]),
                     peer.PEER: _runs(peer.PEER, [3.0, 4.0, 3.5], [2400, 2000, 2600])}}
    summaries = {"tokens": 1024, "workload": "summaries", "skipped": {},
                 "runs": {"txviz": _runs("txviz", [1.2, 1.3, 1.25], [800] * 3),
                          "plain": _runs("plain", [1.0, 1.0, 1.1], [700] * 3)}}
    assert peer_report.side_summary(maps["runs"]["txviz"]) == {
        "median_s": 2.0, "min_s": 1.0, "max_s": 9.0, "cpu_s": 2.0, "peak_mb": 1000, "n": 3}
    ratios = peer_report.row_ratios(maps)
    assert ratios["speedup"] == pytest.approx(3.5 / 2.0) and ratios["memory"] == pytest.approx(1000 / 2400, abs=1e-3)
    assert peer_report.verdicts(maps) == ["speed-up 1.75× (target ≥ 1.5×) met (CPU seconds: 1.75×)",
                                          "memory 0.42× (target ≤ 0.6×) met"]
    assert peer_report.row_ratios(summaries)["over_plain"] == pytest.approx(1.25)
    assert peer_report.verdicts(summaries) == ["trace / plain 1.25× (target ≤ 1.1×) MISSED"]
    text = peer_report.markdown(_result([maps, summaries]))
    assert "Test CPU (2 CPUs), 2 threads, load average 1.00 / 2.00 / 3.00" in text
    assert "| 1024 | maps | txviz | 2.00 (1.00–9.00) | 2.00 | 1000 | |" in text
    assert "| 1024 | maps | transformer-lens | 3.50 (3.00–4.00) | 3.50 | 2400 | |" in text


def test_a_skipped_side_is_reported_not_judged():
    row = {"tokens": 4096, "workload": "everything", "runs": {"txviz": _runs("txviz", [5.0], [7000])},
           "skipped": {peer.PEER: "estimated peak 40.0 GiB > 80% of 20.0 GiB available"}}
    assert peer_report.row_ratios(row) == {"speedup": None, "cpu_speedup": None, "memory": None}
    assert peer_report.verdicts(row)[0] == "speed-up ≥ 1.5×: not measured (a side was skipped)"
    assert "| 4096 | everything | transformer-lens | skipped: estimated peak 40.0 GiB" in peer_report.markdown(_result([row]))


def test_rounds_alternate_sides_in_fresh_workers_and_skip_what_would_not_fit():
    jobs = []

    def spawn(job, python=sys.executable):
        jobs.append((job.get("kind") or job["side"], job.get("workload"), python))
        if job.get("kind") == "plan":
            return {"ids": list(range(job["tokens"])), "n_layers": 30, "n_heads": 9, "d_model": 576,
                    "vocab_size": 49152, "n_params": 135_000_000}
        assert len(job["ids"]) == job["tokens"]
        return {"side": job["side"], "wall_s": 1.0, "cpu_s": 1.0, "peak_rss_mb": 1.0, "threads": 1}

    result = peer.run((1024, 4096), repeats=3, workloads=("maps",), peer_python="/peer/python", spawn=spawn,
                      importable=lambda python, api: python == "/peer/python", folder=lambda source: "/hf",
                      available_bytes=lambda: 12 * 2**30)
    assert jobs[0][0] == "plan"
    at_1024 = [side for side, _, _ in jobs[1:7]]
    assert at_1024 == ["txviz", peer.PEER, peer.PEER, "txviz", "txviz", peer.PEER]  # who goes first alternates
    assert all(python == "/peer/python" for side, _, python in jobs if side == peer.PEER)
    assert all(python == sys.executable for side, _, python in jobs if side != peer.PEER)
    long_row = result["rows"][1]  # 4096 tokens: TransformerLens' fp32 maps alone are 18 GB
    assert set(long_row["skipped"]) == {peer.PEER} and len(long_row["runs"]["txviz"]) == 3
    assert peer.estimated_peak_bytes({"n_layers": 30, "n_heads": 9, "d_model": 576, "vocab_size": 49152,
                                      "n_params": 0}, "maps", peer.PEER, 4096, "fp16-packed") > 30 * 9 * 4096 ** 2 * 4


PARTS = {"layer": 0, "tokens": 4096, "n_layers": 30, "fused_s": 0.31, "traced_s": 0.49, "products_s": 0.30,
         "softmax_s": 0.10, "summaries_s": 0.09}


@pytest.mark.parametrize("trace_wall, bounded", [(1.3, True), (1.05, False)])
def test_a_summaries_miss_is_reported_with_what_bounds_it(trace_wall, bounded):
    jobs = []

    def spawn(job, python=sys.executable):
        jobs.append(job)
        if job.get("kind") == "plan":
            return {"ids": list(range(job["tokens"])), "n_layers": 30, "n_heads": 9, "d_model": 576,
                    "vocab_size": 49152, "n_params": 135_000_000}
        if job.get("kind") == "attention":
            return {**PARTS, "tokens": len(job["ids"])}
        wall = trace_wall if job["side"] == "txviz" else 1.0
        return {"side": job["side"], "wall_s": wall, "cpu_s": 2 * wall, "peak_rss_mb": 900.0, "threads": 2}

    result = peer.run((4096,), repeats=2, workloads=("summaries",), threads=2, spawn=spawn,
                      importable=lambda python, api: True, folder=lambda source: "/hf", available_bytes=lambda: 12 * 2**30)
    asked = [job for job in jobs if job.get("kind") == "attention"]
    text = peer_report.markdown(result)
    if not bounded:  # met: nothing more is run or said
        assert asked == [] and "what bounds" not in text
        return
    [job] = asked  # one breakdown, of the run's own tokens and threads, in its own process
    assert job["ids"] == list(range(4096)) and job["threads"] == 2 and job["repeats"] == 2
    line = next(line for line in text.splitlines() if line.startswith("- 4096 tokens, what bounds"))
    # describe() is given the rounds' median CPU seconds: the trace's excess over the plain forward (2.6 − 2.0)
    assert "fused kernel 310.0; traced 490.0 (1.58×)" in line and "trace's 0.60 s over the plain forward" in line


def test_the_peer_worker_times_the_attention_layer_on_the_jobs_tokens(monkeypatch, capsys):
    from txviz.bench import worker

    model = random_decoder(tiny_config())
    monkeypatch.setattr(worker.LOADER, "ours", lambda source: type("Loaded", (), {"model": model})())
    assert peer_worker.main({"kind": "attention", "source": "default", "threads": None,
                             "ids": list(range(1, 40)), "repeats": 1}) == 0
    parts = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert parts["tokens"] == 39 and parts["n_layers"] == model.config.n_layers
    assert {"fused_s", "traced_s", "products_s", "softmax_s", "summaries_s"} <= set(parts)


def test_absent_peer_stops_with_one_line_saying_how_to_install(tmp_path, capsys):
    no_lens = tmp_path / "python"
    no_lens.write_text("#!/bin/sh\nexit 1\n")  # an interpreter that cannot import transformer_lens
    no_lens.chmod(0o755)
    status = cli.main(["bench", "--peer", "transformer-lens", "--peer-python", str(no_lens), "--tokens", "64"])
    error = capsys.readouterr().err.strip()
    assert status != 0 and len(error.splitlines()) == 1
    assert "TransformerLens is not importable" in error and "pip install 'txviz[bench]'" in error


def test_the_command_passes_its_options_to_the_peer_run():
    seen = {}

    def run(tokens, **options):
        seen.update(options, tokens=tokens)
        return _result([])

    args = cli.build_parser().parse_args(["bench", "--peer", "transformer-lens", "--json", "--threads", "2",
                                          "--maps", "fp32", "--peer-python", "/x/python", "--peer-api", "hooked"])
    cmd_bench(args, run=run)
    assert seen["tokens"] == peer.DEFAULT_TOKENS and seen["repeats"] == peer.DEFAULT_REPEATS
    assert (seen["threads"], seen["maps"], seen["peer_python"], seen["peer_api"]) == (2, "fp32", "/x/python", "hooked")
    cmd_bench(cli.build_parser().parse_args(["bench", "--peer", "transformer-lens", "--json"]), run=run)
    assert seen["peer_api"] == peer_lens.DEFAULT_API


class TinyLoader(peer_worker.Loader):
    def __init__(self):
        self.model = random_decoder(tiny_config())

    def txviz(self, source):
        return self.model


@pytest.mark.parametrize("workload,side", [("maps", "txviz"), ("everything", "txviz"), ("summaries", "txviz"),
                                           ("summaries", "plain")])
def test_worker_runs_each_txviz_side_once_and_reads_the_calls_peak(workload, side):
    job = {"workload": workload, "side": side, "tokens": 40, "threads": 1, "source": "tiny", "maps": "fp16-packed",
           "ids": list(range(3, 43))}
    calls = []

    def clock(function):
        calls.append(function())
        return calls[-1], 0.5, 0.25

    result = json.loads(json.dumps(peer_worker.run(job, loader=TinyLoader(), clock=clock)))
    assert len(calls) == 2 and result["tokens"] == 40 and result["wall_s"] == 0.5
    assert result["peak_rss_mb"] > 0 and result["threads"] == 1
    if side == "txviz" and workload != "summaries":
        maps = calls[-1]["attn_probs"]  # the storage the job named: fp16, lower triangle packed
        assert maps.dtype.is_floating_point and maps.shape[-1] == 40 * 41 // 2
    if workload == "everything":
        assert set(peer_worker.EVERYTHING) <= set(calls[-1].data)


def test_the_report_names_transformer_lens_version_model_class_and_settings():
    row = {"tokens": 1024, "workload": "maps", "skipped": {},
           "runs": {"txviz": _runs("txviz", [2.0], [1000]),
                    peer.PEER: [{**r, "version": "4.3.0"} for r in _runs(peer.PEER, [4.0], [2300])]}}
    for api in peer_lens.APIS:
        text = peer_report.markdown({**_result([row]), "peer_api": api, "peer_settings": peer_lens.SETTINGS[api]})
        assert f"TransformerLens 4.3.0: {peer_lens.SETTINGS[api]}; run_with_cache under torch.inference_mode." in text
    assert peer_lens.SETTINGS["bridge"].startswith("TransformerBridge.boot_transformers")
    assert peer_lens.SETTINGS["hooked"].startswith("HookedTransformer")


def test_the_worker_hands_transformer_lens_the_model_class_the_job_names(monkeypatch):
    asked = []

    class Lens(peer_worker.Loader):
        def lens(self, folder, api=peer_lens.DEFAULT_API):
            asked.append((folder, api))
            return random_decoder(tiny_config())

    monkeypatch.setattr(peer_lens, "run_with_cache", lambda model, ids, workload: model(ids))
    job = {"workload": "maps", "side": peer.PEER, "folder": "/hf", "peer_api": "hooked", "ids": list(range(3, 23))}
    result = peer_worker.run(job, loader=Lens(), clock=lambda f: (f(), 1.0, 1.0))
    assert asked == [("/hf", "hooked")] and result["peer_api"] == "hooked" and result["tokens"] == 20


def test_a_missing_hooked_transformer_says_which_transformer_lens_to_use(tmp_path, capsys):
    no_lens = tmp_path / "python"
    no_lens.write_text("#!/bin/sh\nexit 1\n")
    no_lens.chmod(0o755)
    status = cli.main(["bench", "--peer", "transformer-lens", "--peer-api", "hooked", "--peer-python", str(no_lens),
                       "--tokens", "64"])
    error = capsys.readouterr().err.strip()
    assert status != 0 and len(error.splitlines()) == 1
    assert "HookedTransformer is not importable" in error and "transformer-lens<4" in error and "--peer-api bridge" in error
