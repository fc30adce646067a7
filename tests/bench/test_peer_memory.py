"""The peer benchmark's memory ceiling: a run too big for the machine ends in its own process with a
sentence (which side, how many tokens, the estimated need), the round goes on without it, and the
report says so; a side that plainly cannot fit is not started at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from txviz.bench import peer, peer_memory, peer_report

ROOT = Path(__file__).resolve().parents[2]
SMOLLM2 = {"n_layers": 30, "n_heads": 9, "d_model": 576, "vocab_size": 49152, "n_params": 135_000_000}


def _in_fresh_process(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_allocation_past_the_ceiling_becomes_the_out_of_memory_sentence():
    # 2 GiB asked of a process allowed 256 MiB more than it holds: without the ceiling torch would
    # simply get the (untouched) memory and the call would return its result.
    result = _in_fresh_process(
        "import json, torch\n"
        "from txviz.bench import peer_memory\n"
        "room = peer_memory.cap(256 << 20)\n"
        "out = peer_memory.guarded(lambda: {'shape': list(torch.empty(1 << 29).shape)}, side='transformer-lens',\n"
        "                          tokens=4096, needs=19 << 30, room=room)\n"
        "print(json.dumps(out))\n")
    assert result.get("out_of_memory") is True, result
    assert result["message"] == ("TransformerLens ran out of memory at 4096 tokens (needs ~19.0 GiB in all; 0.2 GiB "
                                 "could be added to the loaded model; an allocation of 2.00 GiB failed)")


def test_the_worker_reports_running_out_of_memory_instead_of_dying():
    result = _in_fresh_process(
        "import json\n"
        "from tests.helpers.tiny import random_decoder, tiny_config\n"
        "from txviz.bench import peer_memory, peer_worker\n"
        "class Tiny(peer_worker.Loader):\n"
        "    def txviz(self, source):\n"
        "        return random_decoder(tiny_config(max_seq_len=4096))\n"
        "job = {'workload': 'maps', 'side': 'txviz', 'source': 'tiny', 'maps': 'fp32', 'threads': 1,\n"
        "       'ids': [3] * 3000, 'headroom_bytes': 64 << 20, 'needs_bytes': 3 << 30}\n"
        "ceiling = lambda: peer_memory.cap(job['headroom_bytes'])\n"
        "print(json.dumps(peer_worker.run(job, loader=Tiny(), ceiling=ceiling)))\n")
    assert result["out_of_memory"] is True and result["tokens"] == 3000
    assert result["message"].startswith("txviz ran out of memory at 3000 tokens (needs ~3.0 GiB")


def test_a_side_that_runs_out_of_memory_is_not_retried_and_the_report_says_so():
    calls = []

    def spawn(job, python=sys.executable):
        if job.get("kind") == "plan":
            return {"ids": list(range(job["tokens"])), **SMOLLM2}
        calls.append(job["side"])
        assert job["needs_bytes"] == peer.estimated_peak_bytes(SMOLLM2, "maps", job["side"], job["tokens"], "fp16-packed")
        if job["side"] == peer.PEER:
            return {"side": peer.PEER, "tokens": job["tokens"], "out_of_memory": True,
                    "message": "TransformerLens ran out of memory at 2048 tokens (needs ~6.0 GiB)"}
        return {"side": job["side"], "wall_s": 1.0, "cpu_s": 1.0, "peak_rss_mb": 1.0, "threads": 1, "version": "x"}

    result = peer.run((2048,), repeats=3, workloads=("maps",), spawn=spawn, importable=lambda python, api: True,
                      folder=lambda source: "/hf", available_bytes=lambda: 20 * 2**30)
    assert calls.count(peer.PEER) == 1 and calls.count("txviz") == 3
    row = result["rows"][0]
    assert row["failed"] == {peer.PEER: "TransformerLens ran out of memory at 2048 tokens (needs ~6.0 GiB)"}
    assert peer_report.verdicts(row)[0] == "speed-up ≥ 1.5×: not measured (a side was skipped)"
    text = peer_report.markdown(result)
    assert "| 2048 | maps | transformer-lens | TransformerLens ran out of memory at 2048 tokens (needs ~6.0 GiB) |" in text


def test_a_close_call_is_tried_under_the_ceiling_and_a_hopeless_one_is_skipped():
    available = int(21.9 * 2**30)  # this machine, quiet
    maps_4096 = peer.estimated_peak_bytes(SMOLLM2, "maps", peer.PEER, 4096, "fp16-packed")
    assert maps_4096 < available - peer_memory.MARGIN_BYTES
    assert peer.memory_skip(SMOLLM2, "maps", peer.PEER, 4096, "fp16-packed", available) is None
    why = peer.memory_skip(SMOLLM2, "everything", peer.PEER, 4096, "fp16-packed", available)
    assert why and why.startswith("estimated peak ") and "20.9 GiB (21.9 GiB available less 1 GiB)" in why


def test_only_a_refused_allocation_counts_as_out_of_memory():
    refused = [MemoryError(), RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"),
               RuntimeError("unable to mmap 538090408 bytes from file <model.safetensors>: Cannot allocate memory (12)")]
    assert all(peer_memory.is_out_of_memory(error) for error in refused)
    assert not peer_memory.is_out_of_memory(RuntimeError("shape mismatch"))
    assert not peer_memory.is_out_of_memory(ValueError("can't allocate memory"))

    def broken():
        raise RuntimeError("shape mismatch")

    try:
        peer_memory.guarded(broken, side="txviz", tokens=8, needs=None, room=None)
    except RuntimeError as error:
        assert str(error) == "shape mismatch"
    else:
        raise AssertionError("an error other than memory must not be turned into a result")
