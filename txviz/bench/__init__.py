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
those ratios spread wide (``ratio_spread``, interquartile range over median, above WIDE_SPREAD) more
rounds are taken, up to MAX_SPREAD_S of sampling per method.

All three compute the last position's logits only (``logits_to_keep=1`` for transformers), so they
differ only in what they do about attention. Peak memory is measured per configuration in a fresh
process each (``ru_maxrss``, weights included), so runs cannot contaminate each other. Decoding
compares ``txviz.generate.generate`` (our KV cache) with transformers' ``generate`` (greedy, same
prompt, same number of new tokens, ``use_cache=True``, no early stop).

``--quick`` runs the same code on a tiny random Llama saved as a Hugging Face checkpoint (no
download, seconds), for CI. Workers are this module run as ``python -m txviz.bench JOB``.
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from txviz.bench.targets import BESIDE_HF, judge, ratios, trace_misses

DEFAULT_TOKENS = (64, 256, 1024, 4096, 8192)
QUICK_TOKENS = (64,)
METHODS = ("plain", "trace", "hf")
MEMORY_HEADROOM = 0.6  # run a method only if its estimated peak is under this share of available memory
DECODE_PROMPT = "What is the capital of France?"
ATTENTION_REPEATS = 5  # the least repeats of --quick's layer breakdown (microseconds each on the tiny model)


# ---- the parent: plan, spawn workers, assemble ----------------------------------------------------
def run(tokens=DEFAULT_TOKENS, *, repeats: int = 3, quick: bool = False, threads: int | None = None,
        decode_tokens: int = 32, hf: bool = True, model: str | None = None,
        progress: Callable[[str], None] | None = None) -> dict:
    """Run every configuration in fresh worker processes and return the ``--json`` result."""
    say = progress or (lambda message: None)
    with tempfile.TemporaryDirectory(prefix="txviz-bench-") as scratch:
        source = model or (_tiny_checkpoint(Path(scratch)) if quick else "default")  # quick: tiny unless named
        hf = hf and _has_transformers()
        base = {"source": source, "threads": threads, "hf": hf}
        results = []
        for n_tokens in tokens:
            say(f"{n_tokens} tokens: timing plain / trace side by side ({repeats} repeats or more)")
            timing = _spawn({**base, "kind": "timing", "tokens": n_tokens, "repeats": repeats,
                             "methods": ["plain", "trace"]})
            beside_hf = None
            if "hf" not in timing["skipped"]:
                say(f"{n_tokens} tokens: timing plain / transformers side by side, in another worker")
                beside_hf = _spawn({**base, "kind": "timing", "tokens": n_tokens, "repeats": repeats,
                                    "methods": ["plain", "hf"]})
            timing = _merge_timings(timing, beside_hf)
            memory = {}
            for method in METHODS:
                if timing["seconds"].get(method) is not None:
                    say(f"{n_tokens} tokens: peak memory of {method} in a fresh process")
                    memory[method] = _spawn({**base, "kind": "memory", "ids": timing["ids"], "method": method})
            row = _result_row(n_tokens, timing, memory)
            if quick or trace_misses(row):  # say what bounds the miss (quick: so CI runs this code too)
                say(f"{n_tokens} tokens: one attention layer timed by part (txviz.bench.attention)")
                # --quick's one repeat after one warm-up timed a cold kernel (QA2: fused 3.30 ms, 0.020 warm)
                row["attention_parts"] = _spawn({**base, "kind": "attention", "ids": timing["ids"],
                                                 "repeats": max(repeats, ATTENTION_REPEATS) if quick else repeats})
            results.append(row)
        say(f"decoding {decode_tokens} tokens: txviz vs transformers generate ({repeats} repeats)")
        decode = _spawn({**base, "kind": "decode", "new_tokens": decode_tokens, "repeats": repeats})
    return {"model": model or ("tiny random llama" if quick else "default"), "quick": quick, "threads": timing["threads"],
            "repeats": repeats, "results": results, "decode": decode,
            "machine": {"cpus": _cpu_count(), "load_average": _load_average()}}


def _merge_timings(traced: dict, beside_hf: dict | None) -> dict:
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


def _result_row(n_tokens: int, timing: dict, memory: dict) -> dict:
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


MODEL_REFUSED_EXIT = 3  # a worker's exit status when the model could not be loaded (its reason on stdout)


def _spawn(job: dict) -> dict:
    completed = subprocess.run([sys.executable, "-m", "txviz.bench", json.dumps(job)], capture_output=True,
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


def _tiny_checkpoint(directory: Path) -> str:
    """A tiny random Llama (GQA) saved with ``save_pretrained``: both libraries load the same weights."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                      tie_word_embeddings=False)
    transformers.LlamaForCausalLM(config).save_pretrained(directory / "tiny-llama")
    return str(directory / "tiny-llama")


def _cpu_count() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _load_average() -> list[float] | None:
    import os
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


# ---- workers ------------------------------------------------------------------------------------
def _worker(job: dict) -> dict:
    if job["threads"]:
        torch.set_num_threads(job["threads"])
    return {"timing": _timing, "memory": _memory, "decode": _decode, "attention": _attention}[job["kind"]](job)


def _attention(job: dict) -> dict:
    from txviz.bench.attention import attention_parts
    return attention_parts(_load_ours(job["source"]).model, torch.tensor(job["ids"])[None], job["repeats"])


def _load_ours(source: str):
    from txviz.loading import load
    return load(None if source == "default" else source, device="cpu", dtype=torch.float32)


def _load_hf(source: str):
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.logging.set_verbosity_error()
    if source == "default":
        from txviz.loading.fetch import ensure_default_model
        path = ensure_default_model()
        hf = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, attn_implementation="eager",
                                                  dtype=torch.float32)
    else:
        hf = AutoModelForCausalLM.from_pretrained(source, attn_implementation="eager", dtype=torch.float32)
    hf.generation_config.eos_token_id = None  # same number of tokens as ours: never stop early
    hf.generation_config.pad_token_id = 0
    return hf.eval()


def _prompt(loaded, n_tokens: int) -> torch.Tensor:
    """(1, T): the shipped text's tokens, repeated to length; random ids for a model without a tokenizer."""
    if loaded.tokenizer is None:
        return torch.randint(0, loaded.config.vocab_size, (1, n_tokens), generator=torch.Generator().manual_seed(0))
    from txviz.analysis.texts import read_text
    base = loaded.tokenizer.encode(read_text(), bos="none").ids
    return torch.tensor((base * (n_tokens // len(base) + 1))[:n_tokens])[None]


def _methods(loaded, hf_model, ids: torch.Tensor) -> dict[str, Callable[[], object]]:
    from txviz.capture.trace import SUMMARY_CAPTURE, trace

    def plain():
        with torch.inference_mode():
            return loaded.model(ids, last_only=True)

    def traced():
        return trace(loaded.model, ids, SUMMARY_CAPTURE)

    def hf():
        with torch.inference_mode():
            return hf_model(ids, output_attentions=True, logits_to_keep=1)

    return {"plain": plain, "trace": traced, **({"hf": hf} if hf_model is not None else {})}


def _skips(job: dict, loaded) -> dict[str, str]:
    """Methods whose estimated peak memory would not fit: skipped with the estimate, not crashed."""
    import psutil

    from txviz.capture.cost import capture_cost
    from txviz.capture.trace import SUMMARY_CAPTURE

    config, t = loaded.config, job["tokens"]
    available = psutil.virtual_memory().available
    weights = loaded.n_params * 4
    estimates = {
        "trace": capture_cost(config, t, SUMMARY_CAPTURE, weight_bytes=weights).peak_bytes,
        # transformers keeps every layer's (H, T, T) weights and holds ~3 more per layer while it runs
        "hf": weights * 2 + (config.n_layers + 3) * config.n_heads * t * t * 4,
    }
    skipped = {m: f"estimated peak {b / 2**30:.1f} GiB > {MEMORY_HEADROOM:.0%} of {available / 2**30:.1f} GiB available"
               for m, b in estimates.items() if b > MEMORY_HEADROOM * available}
    if not job["hf"]:
        skipped["hf"] = "transformers not installed or --no-hf"
    return skipped


def _timing(job: dict) -> dict:
    """The methods ``job["methods"]`` names (all three when it names none) side by side in this process;
    a model is loaded only when one of them needs it (transformers' only for ``hf``)."""
    loaded = _load_ours(job["source"])
    skipped = _skips(job, loaded)
    wanted = [m for m in job.get("methods", METHODS) if m not in skipped]
    hf_model = _load_hf(job["source"]) if "hf" in wanted else None
    ids = _prompt(loaded, job["tokens"])
    methods = {m: f for m, f in _methods(loaded, hf_model, ids).items() if m in wanted}
    for name, method in _methods(loaded, hf_model, ids[:, :16]).items():  # warm up every code path timed
        if name in wanted:
            method()
    samples, rounds = _rounds(methods, job["repeats"])
    wall, cpu, faults = ({m: [s[i] for s in samples[m]] for m in methods} for i in range(3))
    latency = _rebuild_latency(methods["trace"](), job["repeats"]) if "trace" in methods else {}
    return {"threads": torch.get_num_threads(), "skipped": skipped, "ids": ids[0].tolist(), "latency": latency,
            "seconds": {m: round(statistics.median(wall[m]), 4) if m in wall else None for m in METHODS},
            "best_seconds": {m: round(min(wall[m]), 4) for m in wall},
            "cpu_seconds": {m: round(statistics.median(cpu[m]), 4) for m in cpu},
            "minflt": {m: int(statistics.median(faults[m])) for m in faults},
            "ratio_spread": {m: round(_spread(cpu[m], cpu["plain"]), 4)
                             for m in cpu if m != "plain" and "plain" in cpu},
            "rounds": rounds}


def _rounds(methods: dict[str, Callable[[], object]], repeats: int) -> tuple[dict[str, list[tuple]], int]:
    """(wall s, CPU s, minor page faults) of each call, round after round, each round in a rotated order
    so no method always follows the same one; as many rounds as ``_needs_more`` asks."""
    samples: dict[str, list[tuple]] = {m: [] for m in methods}
    order, repeat = list(methods), 0
    while repeat < repeats or _needs_more({m: [s[0] for s in samples[m]] for m in methods}, repeat,
                                          {m: [s[1] for s in samples[m]] for m in methods}):
        for method in order[repeat % len(order):] + order[:repeat % len(order)]:  # rotate: no fixed position
            samples[method].append(_measure(methods[method]))
        repeat += 1
    return samples, repeat


# Short calls get more rounds: at 64 tokens a forward takes ~0.2 s on one thread, and three rounds read the
# trace/plain ratio as 1.23 on a quiet machine (2026-12-01) where 10-12 rounds read 1.07-1.13 under load: a
# 10% target needs more samples than that. Rounds go on until every method has been timed for MIN_SAMPLED_S
# in all (at most MAX_ROUNDS rounds); long prompts keep ``repeats``, unless the per-round ratios to the
# plain forward spread wider than WIDE_SPREAD (interquartile range over median; half the 10% margin of
# the target): then rounds go on while each method has been timed less than MAX_SPREAD_S.
MIN_SAMPLED_S, MAX_ROUNDS = 3.0, 30
WIDE_SPREAD, MAX_SPREAD_S = 0.05, 45.0


def _needs_more(wall: dict[str, list[float]], rounds: int, cpu: dict[str, list[float]] | None = None) -> bool:
    if rounds >= MAX_ROUNDS:
        return False
    sampled = min(sum(samples) for samples in wall.values())
    if sampled < MIN_SAMPLED_S:
        return True
    if cpu is None or "plain" not in cpu or sampled >= MAX_SPREAD_S:
        return False
    return any(_spread(cpu[m], cpu["plain"]) > WIDE_SPREAD for m in cpu if m != "plain")


def _spread(seconds: list[float], plain: list[float]) -> float:
    """How widely a method's per-round ratios to the plain forward of the same round spread: the
    interquartile range over the median (with fewer than four rounds, the whole range)."""
    per_round = [s / p for s, p in zip(seconds, plain) if p > 0]
    if len(per_round) < 2:
        return 0.0
    if len(per_round) >= 4:
        low, high = statistics.quantiles(per_round, n=4, method="inclusive")[::2]
    else:
        low, high = min(per_round), max(per_round)
    median = statistics.median(per_round)
    return (high - low) / median if median > 0 else 0.0  # a method too fast for the CPU clock has no spread to read


def _rebuild_latency(tr, repeats: int) -> dict[str, float]:
    """What a click costs once the trace exists: one head's whole map, and a 256-row band of it,
    rebuilt from q_rot/k_rot (middle layer, first head)."""
    layer, t = tr.layers[len(tr.layers) // 2], tr.n_tokens
    band = slice(max(0, t - 256), t)
    whole = [_measure(lambda: tr.attn(layer, 0))[0] for _ in range(repeats)]
    rows = [_measure(lambda: tr.attn(layer, 0, rows=band))[0] for _ in range(repeats)]
    return {"rebuild_map_s": round(statistics.median(whole), 4), "rebuild_rows_s": round(statistics.median(rows), 4)}


def _measure(function: Callable[[], object]) -> tuple[float, float, int]:
    """One call's wall seconds, CPU seconds (user + sys) and minor page faults (pages the process had to
    be handed: fresh memory, zeroed by the kernel)."""
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = function()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    del result
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_minflt - before.ru_minflt


def _memory(job: dict) -> dict:
    """One method once, in a process that loads only the model it needs."""
    ids = torch.tensor(job["ids"])[None]
    hf = job["method"] == "hf"
    loaded = None if hf else _load_ours(job["source"])
    hf_model = _load_hf(job["source"]) if hf else None
    load_peak = _max_rss_mb()
    if hf:
        with torch.inference_mode():
            result = hf_model(ids, output_attentions=True, logits_to_keep=1)
    else:
        result = _methods(loaded, None, ids)[job["method"]]()
    del result
    return {"load_rss_mb": load_peak, "peak_rss_mb": _max_rss_mb()}


def _max_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux: KiB


def _decode(job: dict) -> dict:
    from txviz.generate import generate

    loaded = _load_ours(job["source"])
    hf_model = _load_hf(job["source"]) if job["hf"] else None
    if loaded.tokenizer is not None and loaded.tokenizer.chat_template:
        text = loaded.tokenizer.apply_chat_template([{"role": "user", "content": DECODE_PROMPT}])
        ids = torch.tensor(loaded.tokenizer.encode(text, bos="none").ids)[None]
    elif loaded.tokenizer is not None:  # a base model (Gemma 3 270M): the prompt as text, with its own BOS rule
        bos = "bos" if loaded.tokenizer.adds_bos else "none"
        ids = torch.tensor(loaded.tokenizer.encode(DECODE_PROMPT, bos=bos).ids)[None]
    else:
        ids = torch.randint(0, loaded.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))
    n = job["new_tokens"]

    def ours():
        return list(generate(loaded.model, ids, n).new_ids)

    def theirs():
        with torch.inference_mode():
            return hf_model.generate(ids, max_new_tokens=n, do_sample=False, use_cache=True)[0, ids.shape[1]:].tolist()

    runs = {"txviz": ours, **({"hf": theirs} if hf_model is not None else {})}
    for function in runs.values():  # warm up
        function()
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    tokens: dict[str, list[int]] = {}
    for repeat in range(job["repeats"]):
        for name in (list(runs) if repeat % 2 == 0 else list(runs)[::-1]):
            start = time.perf_counter()
            tokens[name] = runs[name]()
            seconds[name].append(time.perf_counter() - start)
    rate = {name: round(n / statistics.median(values), 2) for name, values in seconds.items()}
    return {"prompt_tokens": ids.shape[1], "new_tokens": n, "txviz_tok_s": rate["txviz"], "hf_tok_s": rate.get("hf"),
            "same_tokens": tokens["txviz"] == tokens["hf"] if "hf" in tokens else None}


# ---- report -------------------------------------------------------------------------------------
def markdown(result: dict) -> str:
    """The results as the Markdown table written into assets/BENCHMARKS.md."""
    lines = _main_table(result["results"])
    for title, key in (("CPU seconds (user + sys, medians) of the same runs: less inflated than wall time by "
                        "other processes on a shared machine.", "cpu_s"),
                       ("Fastest repeat (wall seconds): the least disturbed run of each method.", "best_s")):
        lines += ["", title, "", *_per_method_table(result["results"], key)]
    lines += ["", *_pollution_table(result["results"])]
    decode = result["decode"]
    lines += ["", f"Decoding {decode['new_tokens']} tokens after a {decode['prompt_tokens']}-token prompt (greedy, "
              f"KV cache): txviz {decode['txviz_tok_s']} tok/s, transformers {_cell(decode['hf_tok_s'], '{}')} tok/s; "
              f"same tokens: {decode['same_tokens']}."]
    skipped = [f"{row['tokens']} tokens, {m}: {why}" for row in result["results"] for m, why in row["skipped"].items()]
    if skipped:
        lines += ["", "Skipped: " + "; ".join(skipped) + "."]
    targets = judge(result)
    if targets:
        lines += ["", "Targets (issue 14), on the CPU-second ratios"
                  + (" (not judged under --quick):" if result.get("quick") else ":"), "",
                  *(f"  - {line.strip()}" if line.startswith("  ") else f"- {line}" for line in targets)]
    return "\n".join(lines)


def _cell(value, fmt="{:.3f}") -> str:
    return "—" if value is None else fmt.format(value)


def _main_table(rows: list[dict]) -> list[str]:
    lines = ["| tokens | plain forward (s) | txviz trace (s) | HF eager + attentions (s) | trace / plain | "
             "HF / trace | trace peak RSS (MB) | plain peak RSS (MB) | HF peak RSS (MB) | rebuild one map (ms) | "
             "rebuild 256 rows (ms) | rounds |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['tokens']} | {_cell(row['plain_forward_s'])} | {_cell(row['trace_s'])} | "
                     f"{_cell(row['hf_eager_attn_s'])} | {_cell(row['trace_over_plain'], '{:.2f}×')} | "
                     f"{_cell(row['hf_over_trace'], '{:.2f}×')} | {_cell(row['peak_rss_mb'], '{:.0f}')} | "
                     f"{_cell(row['plain_peak_rss_mb'], '{:.0f}')} | {_cell(row['hf_peak_rss_mb'], '{:.0f}')} | "
                     f"{_cell(_ms(row.get('rebuild_map_s')), '{:.1f}')} | {_cell(_ms(row.get('rebuild_rows_s')), '{:.1f}')} | "
                     f"{_cell(row.get('rounds'), '{}')} |")
    return lines


def _per_method_table(rows: list[dict], key: str) -> list[str]:
    """One figure per method (``key``: cpu_s or best_s) and the ratios ``targets.ratios`` takes."""
    lines = ["| tokens | plain forward | txviz trace | plain beside HF | HF eager + attentions | trace / plain | "
             "HF / plain | HF / trace |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        values = row.get(key, {})
        quotients = ratios(values)
        lines.append(f"| {row['tokens']} | {_cell(values.get('plain'))} | {_cell(values.get('trace'))} | "
                     f"{_cell(values.get(BESIDE_HF))} | {_cell(values.get('hf'))} | "
                     + " | ".join(_cell(quotients[name], '{:.2f}×')
                                  for name in ("trace_over_plain", "hf_over_plain", "hf_over_trace")) + " |")
    return lines


def _pollution_table(rows: list[dict]) -> list[str]:
    lines = ["Trace and plain forward are timed side by side in one worker, transformers and a plain forward in "
             "another (no transformers model beside the trace); HF / trace = (HF / plain) ÷ (trace / plain). "
             "Minor page faults per call (medians), and the spread of the per-round CPU ratios to the plain "
             "forward (interquartile range / median):", "",
             "| tokens | plain | trace | plain beside HF | HF | trace spread | HF spread | rounds (trace, HF) |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        faults, spread = row.get("minflt", {}), row.get("ratio_spread", {})
        counts = " | ".join(_cell(faults.get(m), "{}") for m in ("plain", "trace", BESIDE_HF, "hf"))
        lines.append(f"| {row['tokens']} | {counts}"
                     + f" | {_cell(spread.get('trace'), '{:.3f}')} | {_cell(spread.get('hf'), '{:.3f}')} | "
                     f"{row.get('rounds')}, {_cell(row.get('hf_rounds'), '{}')} |")
    return lines


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _main(job: dict) -> int:
    """A worker's entry point: its result as JSON, or, when the model cannot be loaded (a missing or
    broken file), the reason as JSON and ``MODEL_REFUSED_EXIT``, so the parent reports one line."""
    try:
        result = _worker(job)
    except (ValueError, FileNotFoundError) as error:  # ModelLoadError and kin: ours, with a message
        print(json.dumps({"error": str(error), "type": type(error).__name__}))
        return MODEL_REFUSED_EXIT
    print(json.dumps(result))
    return 0

