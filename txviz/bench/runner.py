"""Benchmarks behind ``txviz bench``: is tracing interactive at full context, and how does it compare?

For each prompt length T, two timing workers, each a fresh process timing two methods side by side
(interleaved, rotated each round, medians over the rounds, so a busy machine slows both alike):

* the trace worker (no transformers model loaded): ``plain_forward_s``, ``model(ids, last_only=True)``:
  the fused SDPA kernel, nothing captured; and ``trace_s``, ``trace(model, ids, SUMMARY_CAPTURE)``:
  every head's summaries per query row and q_rot/k_rot, so any map can be rebuilt exactly on demand;
* the transformers worker (only when transformers runs): the same plain forward again
  (``plain_beside_hf``) and ``hf_eager_attn_s``, transformers' eager attention with
  ``output_attentions=True`` on the same weights (all maps materialized), null where its maps would not
  fit in memory.

``trace_over_plain`` comes from the trace worker alone and ``hf_over_plain`` from the transformers worker
alone; ``hf_over_trace`` is their quotient, (hf / plain) ÷ (trace / plain), never hf over a trace timed in
another process. Apart because what ran before a call changes it: in one process, a quiet run read
trace / plain at 1024 tokens as 1.04 with nothing between calls and 1.11 after 1.2 GB (transformers'
maps) was allocated, touched and freed between rounds. Not through page faults (``minflt``: minor faults
per call, medians): each of those maps is above glibc's 32 MB mmap ceiling, so it is unmapped whole when
freed and the heap the next call uses is untouched; measured 2026-12-02 at 1024 tokens, load 6, a trace
met ~23 000 faults a call (its q_rot/k_rot output, fresh by necessity) with or without the 1.2 GB
between calls, a plain forward 0–9 400 (the most beside the trace, none beside transformers: ~37 MB, under
1% of its 2.5 s). Whatever moves the ratio (caches, TLB), two workers keep each pair of
figures free of the other method. Each call's CPU seconds are also divided by its round's plain forward; where
those ratios spread wide (``ratio_spread``, interquartile range over median, above ``wide_spread``) more
rounds are taken, up to ``max_spread_s`` of sampling per method (txviz.bench.rounds).

All three compute the last position's logits only (``logits_to_keep=1`` for transformers), so they
differ only in what they do about attention. Peak memory is measured per configuration in a fresh
process each (``ru_maxrss``, weights included), so runs cannot contaminate each other. Decoding
compares ``txviz.generate.generate`` (our KV cache) with transformers' ``generate`` (greedy, same
prompt, same number of new tokens, ``use_cache=True``, no early stop).

``--quick`` runs the same code on a tiny random Llama saved as a Hugging Face checkpoint (no
download, seconds), for CI. Workers are txviz.bench.worker, each run as ``python -m txviz.bench.worker JOB``;
how many rounds a timing takes is txviz.bench.rounds'.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import torch

from txviz.bench.targets import BESIDE_HF, ratios, trace_misses
from txviz.bench.worker import METHODS, MODEL_REFUSED_EXIT

DEFAULT_TOKENS = (64, 256, 1024, 4096, 8192)
QUICK_TOKENS = (64,)
ATTENTION_REPEATS = 5  # the least repeats of --quick's layer breakdown (microseconds each on the tiny model)


def run(tokens=DEFAULT_TOKENS, *, repeats: int = 3, quick: bool = False, threads: int | None = None,
        decode_tokens: int = 32, hf: bool = True, model: str | None = None,
        progress: Callable[[str], None] | None = None, spawn: Callable[[dict], dict] | None = None,
        tiny_checkpoint: Callable[[Path], str] | None = None) -> dict:
    """Run every configuration in fresh worker processes and return the ``--json`` result. ``spawn``
    runs one job and returns its result (default: a fresh ``python -m txviz.bench.worker`` process);
    ``tiny_checkpoint`` writes --quick's tiny random model into a directory and returns its path."""
    spawn = spawn or spawn_worker
    tiny_checkpoint = tiny_checkpoint or write_tiny_checkpoint
    say = progress or (lambda message: None)
    with tempfile.TemporaryDirectory(prefix="txviz-bench-") as scratch:
        source = model or (tiny_checkpoint(Path(scratch)) if quick else "default")  # quick: tiny unless named
        hf = hf and _has_transformers()
        base = {"source": source, "threads": threads, "hf": hf}
        results = []
        for n_tokens in tokens:
            say(f"{n_tokens} tokens: timing plain / trace side by side ({repeats} repeats or more)")
            timing = spawn({**base, "kind": "timing", "tokens": n_tokens, "repeats": repeats,
                             "methods": ["plain", "trace"]})
            beside_hf = None
            if "hf" not in timing["skipped"]:
                say(f"{n_tokens} tokens: timing plain / transformers side by side, in another worker")
                beside_hf = spawn({**base, "kind": "timing", "tokens": n_tokens, "repeats": repeats,
                                    "methods": ["plain", "hf"]})
            timing = merge_timings(timing, beside_hf)
            memory = {}
            for method in METHODS:
                if timing["seconds"].get(method) is not None:
                    say(f"{n_tokens} tokens: peak memory of {method} in a fresh process")
                    memory[method] = spawn({**base, "kind": "memory", "ids": timing["ids"], "method": method})
            row = result_row(n_tokens, timing, memory)
            if quick or trace_misses(row):  # say what bounds the miss (quick: so CI runs this code too)
                say(f"{n_tokens} tokens: one attention layer timed by part (txviz.bench.attention)")
                # --quick's one repeat after one warm-up timed a cold kernel (fused 3.30 ms against 0.020 warm)
                row["attention_parts"] = spawn({**base, "kind": "attention", "ids": timing["ids"],
                                                 "repeats": max(repeats, ATTENTION_REPEATS) if quick else repeats})
            results.append(row)
        say(f"decoding {decode_tokens} tokens: txviz vs transformers generate ({repeats} repeats)")
        decode = spawn({**base, "kind": "decode", "new_tokens": decode_tokens, "repeats": repeats})
    return {"model": model or ("tiny random llama" if quick else "default"), "quick": quick, "threads": timing["threads"],
            "repeats": repeats, "results": results, "decode": decode,
            "machine": {"cpus": cpu_count(), "load_average": load_average()}}


def run_decoding(*, rounds: int = 3, quick: bool = False, threads: int | None = None, model: str | None = None,
                 new_tokens: int | None = None, progress: Callable[[str], None] | None = None,
                 spawn: Callable[[dict], dict] | None = None,
                 tiny_checkpoint: Callable[[Path], str] | None = None) -> dict:
    """``txviz bench --decoding``: the decoding workload (txviz.bench.decoding) in one fresh worker, with
    the machine (CPU model, cores, load average before and after) beside it."""
    from txviz.bench.decoding import NEW_TOKENS, PROMPT_TOKENS
    spawn = spawn or spawn_worker
    tiny_checkpoint = tiny_checkpoint or write_tiny_checkpoint
    say = progress or (lambda message: None)
    with tempfile.TemporaryDirectory(prefix="txviz-bench-") as scratch:
        source = model or (tiny_checkpoint(Path(scratch)) if quick else "default")
        n = new_tokens or NEW_TOKENS
        say(f"decoding {n} tokens after a {PROMPT_TOKENS}-token prompt: plain / record / record + lens side by side "
            f"({rounds} rounds), then a branch")
        before = load_average()
        result = spawn({"kind": "decoding", "source": source, "threads": threads, "hf": False, "rounds": rounds,
                        "prompt_tokens": PROMPT_TOKENS, "new_tokens": n})
    return {"model": model or ("tiny random llama" if quick else "default"), "quick": quick, "decoding": result,
            "machine": {"cpu": cpu_model(), "cpus": cpu_count(), "load_average_before": before,
                        "load_average_after": load_average()}}


def merge_timings(traced: dict, beside_hf: dict | None) -> dict:
    """The trace worker's result with the transformers worker's figures added: its transformers entry
    as ``hf`` and its plain forward as BESIDE_HF, in every per-method table."""
    merged = {**traced, "hf_rounds": None}
    tables = ("seconds", "best_seconds", "cpu_seconds", "minflt", "ratio_spread")
    merged.update({name: dict(traced[name]) for name in tables})
    if beside_hf is None:
        return merged
    merged["hf_rounds"] = beside_hf["rounds"]
    for name in tables:
        figures = {"hf": beside_hf[name].get("hf"), BESIDE_HF: beside_hf[name].get("plain")}
        merged[name].update({key: value for key, value in figures.items() if value is not None or key == "hf"})
    return merged


def result_row(n_tokens: int, timing: dict, memory: dict) -> dict:
    seconds, cpu = timing["seconds"], timing["cpu_seconds"]
    peak = {m: memory[m]["peak_rss_mb"] for m in memory}
    wall = ratios(seconds)
    return {"tokens": n_tokens, "plain_forward_s": seconds["plain"], "trace_s": seconds["trace"],
            "hf_eager_attn_s": seconds.get("hf"), BESIDE_HF + "_s": seconds.get(BESIDE_HF),
            "peak_rss_mb": peak.get("trace"), "plain_peak_rss_mb": peak.get("plain"), "hf_peak_rss_mb": peak.get("hf"),
            **{key: None if value is None else round(value, 3) for key, value in wall.items()},
            "best_s": timing["best_seconds"],  # the fastest repeat: least disturbed by other processes
            "rounds": timing["rounds"], "hf_rounds": timing["hf_rounds"],
            "minflt": timing["minflt"], "ratio_spread": timing["ratio_spread"],
            **timing["latency"], "cpu_s": cpu, "skipped": timing["skipped"],
            "load_rss_mb": {m: memory[m]["load_rss_mb"] for m in memory}}


def spawn_worker(job: dict) -> dict:
    completed = subprocess.run([sys.executable, "-m", "txviz.bench.worker", json.dumps(job)], capture_output=True,
                               text=True, timeout=3 * 3600)
    if completed.returncode == MODEL_REFUSED_EXIT:  # the model's own fault: one line for the user, as load says it
        from txviz.loading.errors import ModelLoadError
        raise ModelLoadError(json.loads(completed.stdout.strip().splitlines()[-1])["error"])
    if completed.returncode != 0:
        raise RuntimeError(f"benchmark worker {job['kind']} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _has_transformers() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def write_tiny_checkpoint(directory: Path) -> str:
    """A tiny random Llama (GQA) saved with ``save_pretrained``: both libraries load the same weights."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                      tie_word_embeddings=False)
    transformers.LlamaForCausalLM(config).save_pretrained(directory / "tiny-llama")
    return str(directory / "tiny-llama")


def cpu_count() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def cpu_model() -> str | None:
    """The CPU's model name as /proc/cpuinfo gives it (None where there is none)."""
    try:
        with open("/proc/cpuinfo") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
    except OSError:
        return None
    return names[0] if names else None


def load_average() -> list[float] | None:
    import os
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
