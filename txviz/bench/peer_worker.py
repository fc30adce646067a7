"""One run of the peer benchmark in a fresh process: ``python -m txviz.bench.peer_worker JOB`` loads one
tool's model, warms it up on 16 tokens, then times one call of one workload and measures that call's
peak resident memory; its result is printed as JSON on stdout.

The workloads ask both tools for the same work on the same tokens:

* ``maps``: every attention map of every layer. TransformerLens: ``run_with_cache`` with a
  ``names_filter`` keeping the ``hook_pattern`` hooks (fp32 (T, T) per head); txviz:
  ``trace(capture=("attn_probs",))`` with the storage the job names (by default fp16, lower triangle
  packed: what a causal map holds, ``txviz.capture.maps.MapStorage``).
* ``everything``: TransformerLens: a plain ``run_with_cache`` (every hook); txviz: the maps and q, k, v,
  rotated q and k, both sublayer outputs, the residual stream and every position's logits.
* ``summaries``: txviz's default trace (every head's summaries per query row, q_rot and k_rot, from
  which any map is rebuilt on demand) beside a plain forward of the same model.

Peak memory is the process's resident high-water mark from the call's start (``/proc/self/clear_refs``
resets it; the weights, resident already, are included), so loading cannot stand in for the call.
Where the models come from (``Loader``) and the clock are parameters, so a test hands in a tiny model.
This module imports txviz only for the txviz side: the TransformerLens side may run in another
interpreter (``--peer-python``) that finds txviz through ``PYTHONPATH``. Which TransformerLens model
class runs is the job's ``peer_api`` (txviz.bench.peer_lens). Every run is held under a memory ceiling
(txviz.bench.peer_memory): a run that would not fit ends with ``out_of_memory`` and a sentence.
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time
from typing import Callable

import torch

from txviz.bench import peer_lens, peer_memory

EVERYTHING = ("attn_probs", "q", "k", "v", "q_rot", "k_rot", "attn_out", "ffn_out", "resid", "logits")
WARM_UP_TOKENS = 16
MAP_STORAGES = ("fp16-packed", "fp32")


class Loader:
    """Each side's model: txviz's own loader, and TransformerLens' model over the Hugging Face folder."""

    def txviz(self, source: str):
        from txviz.loading import load
        return load(None if source == "default" else source, device="cpu", dtype=torch.float32).model

    def lens(self, folder: str, api: str = peer_lens.DEFAULT_API):
        return peer_lens.load(folder, api)


def map_storage(name: str):
    from txviz.capture.maps import MapStorage
    return MapStorage(dtype=torch.float16, lower_triangle=True) if name == "fp16-packed" else MapStorage()


def call(job: dict, model, ids: torch.Tensor) -> Callable[[], object]:
    """The one call a job times: its workload on its side."""
    workload, side = job["workload"], job["side"]
    if side == "transformer-lens":
        return lambda: peer_lens.run_with_cache(model, ids, workload)
    if side == "plain":
        return lambda: _plain(model, ids)
    from txviz.capture.trace import SUMMARY_CAPTURE, trace
    capture = {"maps": ("attn_probs",), "everything": EVERYTHING, "summaries": SUMMARY_CAPTURE}[workload]
    storage = map_storage(job.get("maps", MAP_STORAGES[0]))
    return lambda: trace(model, ids, capture, maps=storage)


def _plain(model, ids):
    with torch.inference_mode():
        return model(ids, last_only=True)


def wall_and_cpu(function: Callable[[], object]) -> tuple[object, float, float]:
    """The call's result, wall seconds and CPU seconds (user + sys, all threads)."""
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = function()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return result, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def reset_peak() -> bool:
    """Start the resident high-water mark afresh (Linux); False where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def resident_mb(field: str = "VmHWM") -> float:
    """The process's peak (VmHWM) or current (VmRSS) resident memory in MB; ru_maxrss off Linux."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run(job: dict, *, loader: Loader = Loader(),
        clock: Callable[[Callable[[], object]], tuple[object, float, float]] = wall_and_cpu,
        ceiling: Callable[[], int | None] = lambda: None) -> dict:
    """The job's one timed call. ``ceiling`` caps the process's memory once the model is loaded (``main``
    passes txviz.bench.peer_memory.cap), so the cap measures from the loaded state; an allocation it
    refuses during the warm-up or the call is returned as ``out_of_memory`` with its sentence."""
    if job.get("threads"):
        torch.set_num_threads(job["threads"])
    side = job["side"]
    api = job.get("peer_api", peer_lens.DEFAULT_API)
    model = loader.lens(job["folder"], api) if side == "transformer-lens" else loader.txviz(job["source"])
    ids = torch.tensor(job["ids"])[None]
    gc.collect()
    room = ceiling()
    measured = peer_memory.guarded(lambda: _timed(job, model, ids, clock), side=side, tokens=ids.shape[1],
                                   needs=job.get("needs_bytes"), room=room)
    if measured.get("out_of_memory"):
        return measured
    return {"version": version(side), "workload": job["workload"], "side": side, "tokens": ids.shape[1],
            **measured, "threads": torch.get_num_threads(), **({"peer_api": api} if side == "transformer-lens" else {})}


def _timed(job: dict, model, ids: torch.Tensor, clock) -> dict:
    clock(call(job, model, ids[:, :WARM_UP_TOKENS]))  # every code path the call takes, warm
    gc.collect()
    load_mb = resident_mb("VmRSS")
    exact_peak = reset_peak()
    result, wall, cpu = clock(call(job, model, ids))
    peak = resident_mb("VmHWM" if exact_peak else "")
    del result
    return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4), "peak_rss_mb": peak, "load_rss_mb": load_mb,
            "peak_is_call": exact_peak}


def version(side: str) -> str:
    from importlib.metadata import PackageNotFoundError, version as installed
    try:
        return installed("transformer-lens" if side == "transformer-lens" else "txviz")
    except PackageNotFoundError:
        return "source tree"


def plan(job: dict) -> dict:
    """What the parent needs before the runs: the tokens (the shipped text, as the main benchmark
    takes them) and the model's sizes for the memory estimates."""
    from txviz.bench.worker import prompt
    from txviz.loading import load

    loaded = load(None if job["source"] == "default" else job["source"], device="cpu", dtype=torch.float32)
    c = loaded.config
    return {"ids": prompt(loaded, job["tokens"])[0].tolist(), "n_layers": c.n_layers, "n_heads": c.n_heads,
            "d_model": c.d_model, "vocab_size": c.vocab_size, "n_params": loaded.n_params}


def main(job: dict) -> int:
    if job.get("kind") == "plan":
        result = plan(job)
    elif job.get("kind") == "attention":  # what bounds a summaries miss: the main benchmark's own job
        from txviz.bench.worker import work
        result = work(job)
    else:
        result = run(job, ceiling=lambda: peer_memory.cap(job.get("headroom_bytes")))  # this process only
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
