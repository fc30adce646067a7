"""``txviz bench --peer transformer-lens``: the same work asked of txviz and of TransformerLens, on the
same tokens and the same weights, each run in a fresh process, the two tools alternating.

For each prompt length and workload (txviz.bench.peer_worker: every attention map, everything, the
summaries beside a plain forward), ``repeats`` rounds; each round runs both sides once, in a fresh
process each, the side that goes first alternating from round to round, so a machine that slows down
during the run slows both alike. A side whose estimated peak memory would not fit is skipped with the
estimate; a side that might fit is run under a memory ceiling (txviz.bench.peer_memory), so a run
that does not fit ends in its own process with "ran out of memory at N tokens" and the row says so,
never waking the kernel's out-of-memory killer. The report (txviz.bench.peer_report) gives medians,
min–max spreads, peak memory and the ratios against the targets; a summaries trace over its target
against the plain forward also gets one attention layer timed by part (txviz.bench.attention, in a
fresh process of its own on the same tokens), and the report says what bounds the miss.

TransformerLens is an optional extra (``pip install 'txviz[bench]'``), never a dependency: it must be
importable by the interpreter that runs its side, this one or the one ``--peer-python`` names; when it
is not, the command says so in one line and stops. Its model is the Hugging Face folder
txviz.bench.peer_model builds from the same .gguf txviz loads, run as the model class ``peer_api``
names (txviz.bench.peer_lens: the bridge of TransformerLens 4.x, or 3.x's HookedTransformer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from txviz.bench import peer_lens
from txviz.bench.peer_memory import MARGIN_BYTES
from txviz.bench.peer_report import summaries_missed

PEER = "transformer-lens"
DEFAULT_TOKENS = (1024, 4096)
DEFAULT_REPEATS = 5
WORKLOADS = {"maps": ("txviz", PEER), "everything": ("txviz", PEER), "summaries": ("txviz", "plain")}


class PeerMissing(ValueError):
    """The peer library cannot be imported by the interpreter meant to run it."""


def missing_message(python: str, api: str = peer_lens.DEFAULT_API) -> str:
    if api == "hooked":
        return (f"TransformerLens' HookedTransformer is not importable by {python} (TransformerLens 4.0 removed "
                f"it): name an interpreter with transformer-lens<4 with --peer-python, or use --peer-api bridge")
    return (f"TransformerLens is not importable by {python}: install the benchmark extra "
            f"(pip install 'txviz[bench]') or name an interpreter that has it with --peer-python")


def peer_importable(python: str, api: str = peer_lens.DEFAULT_API) -> bool:
    probe = subprocess.run([python, "-c", peer_lens.PROBES.get(api, "import transformer_lens")], capture_output=True,
                           env=worker_env(python))
    return probe.returncode == 0


def worker_env(python: str) -> dict:
    """This interpreter's environment; another interpreter also gets the txviz tree on its path."""
    env = dict(os.environ)
    if python != sys.executable:
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def spawn_worker(job: dict, python: str = sys.executable) -> dict:
    completed = subprocess.run([python, "-m", "txviz.bench.peer_worker", json.dumps(job)], capture_output=True,
                               text=True, env=worker_env(python), timeout=3 * 3600)
    if completed.returncode != 0:
        raise RuntimeError(f"peer benchmark worker ({job.get('side', job.get('kind'))}) failed:\n"
                           f"{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def default_folder(source: str) -> str:
    from txviz.bench.peer_model import peer_folder
    from txviz.loading import fetch
    gguf = fetch.ensure(fetch.DEFAULT_MODEL) if source == "default" else Path(source)
    if gguf.is_dir():  # already a Hugging Face folder
        return str(gguf)
    return str(peer_folder(gguf))


def run(tokens=DEFAULT_TOKENS, *, repeats: int = DEFAULT_REPEATS, threads: int | None = None,
        workloads=tuple(WORKLOADS), maps: str = "fp16-packed", source: str = "default",
        peer_python: str | None = None, peer_api: str = peer_lens.DEFAULT_API,
        progress: Callable[[str], None] | None = None, spawn: Callable[..., dict] = spawn_worker,
        importable: Callable[..., bool] = peer_importable, folder: Callable[[str], str] = default_folder,
        available_bytes: Callable[[], int] | None = None) -> dict:
    """Every workload at every length, ``repeats`` rounds of fresh processes; the ``--json`` result."""
    say = progress or (lambda message: None)
    peer_python = peer_python or sys.executable
    needs_peer = any(PEER in WORKLOADS[w] for w in workloads)
    if needs_peer and not importable(peer_python, peer_api):
        raise PeerMissing(missing_message(peer_python, peer_api))
    hf_folder = folder(source) if needs_peer else None
    available = (available_bytes or _available_bytes)()
    start_load = load_average()
    say(f"tokens and model sizes ({max(tokens)} tokens)")
    info = spawn({"kind": "plan", "source": source, "tokens": max(tokens)})
    rows = []
    for n_tokens in tokens:
        for workload in workloads:
            base = {"workload": workload, "tokens": n_tokens, "threads": threads, "source": source,
                    "folder": hf_folder, "maps": maps, "ids": info["ids"][:n_tokens], "peer_api": peer_api}
            skipped = {side: why for side in WORKLOADS[workload]
                       if (why := memory_skip(info, workload, side, n_tokens, maps, available))}
            sides = [side for side in WORKLOADS[workload] if side not in skipped]
            runs: dict[str, list[dict]] = {side: [] for side in sides}
            failed: dict[str, str] = {}
            for round_ in range(repeats):
                for side in (sides if round_ % 2 == 0 else sides[::-1]):
                    if side in failed:
                        continue  # a length that ran out of memory once is not tried again
                    say(f"{n_tokens} tokens, {workload}: {side} (round {round_ + 1} of {repeats})")
                    python = peer_python if side == PEER else sys.executable
                    needs = estimated_peak_bytes(info, workload, side, n_tokens, maps)
                    outcome = spawn({**base, "side": side, "needs_bytes": needs}, python=python)
                    if outcome.get("out_of_memory"):
                        failed[side] = outcome["message"]
                        say(outcome["message"])
                    else:
                        runs[side].append(outcome)
            row = {"tokens": n_tokens, "workload": workload, "runs": runs, "skipped": skipped, "failed": failed}
            if summaries_missed(row):  # say what bounds the miss, in a fresh process of its own
                say(f"{n_tokens} tokens: one attention layer timed by part (txviz.bench.attention)")
                row["attention_parts"] = spawn({"kind": "attention", "source": source, "threads": threads,
                                                "ids": base["ids"], "repeats": repeats})
            rows.append(row)
    return {"peer": PEER, "peer_api": peer_api, "peer_settings": peer_lens.SETTINGS[peer_api],
            "repeats": repeats, "maps": maps, "rows": rows,
            "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "threads": threads,
                        "load_average_start": start_load, "load_average_end": load_average(),
                        "available_gb": round(available / 2**30, 1)}}


def estimated_peak_bytes(info: dict, workload: str, side: str, t: int, maps: str) -> int:
    """A side's peak: weights, what it keeps, and what one layer holds while it runs. TransformerLens
    keeps fp32 (T, T) patterns (and, for everything, the scores beside them); txviz its chosen storage."""
    layers, heads, d, vocab = info["n_layers"], info["n_heads"], info["d_model"], info["vocab_size"]
    weights, square = info["n_params"] * 4, heads * t * t * 4
    activations = t * (layers * 12 * d + vocab) * 4  # q, k, v, rotated, outputs, residuals, logits
    if side == "plain":
        return weights + 4 * t * d * 4
    if side == PEER:
        kept = layers * square * (2 if workload == "everything" else 1)
        # every hook's activations, several per tensor: 1.5x read TransformerLens 4.3's 4.9 GB at 1024 tokens
        return 2 * weights + kept + 3 * square + (activations * 3 // 2 if workload == "everything" else 0)
    if workload == "summaries":
        return weights + layers * t * 2 * heads * 64 * 4 + 2 * square // max(1, t // 512)
    stored = layers * heads * (t * (t + 1) // 2 * 2 if maps == "fp16-packed" else t * t * 4)
    return weights + stored + (activations if workload == "everything" else 0) + square


def memory_skip(info: dict, workload: str, side: str, t: int, maps: str, available: int) -> str | None:
    """Why a side is not even tried: its estimated peak exceeds the available memory less the margin the
    worker's ceiling leaves. Closer calls are tried under that ceiling."""
    need, room = estimated_peak_bytes(info, workload, side, t, maps), available - MARGIN_BYTES
    if need <= room:
        return None
    return (f"estimated peak {need / 2**30:.1f} GiB > {room / 2**30:.1f} GiB "
            f"({available / 2**30:.1f} GiB available less {MARGIN_BYTES / 2**30:.0f} GiB)")


def _available_bytes() -> int:
    import psutil
    return psutil.virtual_memory().available


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
