"""Run work on untrusted input (a model file's chat template, its header) where the OS can stop it.

A deadline enforced by a thread of the same process can stop Python loops between two bytecodes, but not
one long C-level operation: ``7 ** 11529602`` or ``'x' * 1200000000`` holds the interpreter lock until it is done,
and every session of a shared server waits. So such work runs in a child interpreter: a worker script
beside this module, started with ``python -I`` (no txviz, no torch: it starts in ~0.1 s), which first
caps its own address space and CPU time (``setrlimit``), then reads one JSON request on stdin and writes
one JSON reply on stdout. The parent waits at most the wall-clock limit and kills it past that. Nothing
crosses the boundary but JSON: no pickling either way.

The wall clock starts when the child says it is ready (one newline on stdout, once its imports are done),
not when it is spawned: the limit is for the work on the input, and starting an interpreter with its
imports takes 0.1 s on a quiet machine but over 1 s at load 13, which refused a 41-character text (its
limit 1 s) before a byte of it was read. The start has its own bound, STARTUP_SECONDS, and no input.

Workers run at most a few at a time per process, within one memory budget for all of them
(txviz.loading.worker_gate): a worker's own cap bounds nothing when every session starts one.

Every way the child can fail comes back as ``IsolatedError`` with a one-line reason: past the deadline,
out of memory, killed by a signal, a crash, or the worker's own refusal (``{"error": ...}``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from txviz.loading.worker_gate import GateBusy, process_gate

WORKERS = Path(__file__).with_name("workers")


class IsolatedError(Exception):
    """The isolated work failed; ``kind`` is timeout, memory, killed, crash, refused or busy (every worker
    slot of the process stayed taken)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Limits:
    """What one piece of isolated work may take. ``memory_bytes`` is added to the child's address space
    at start (the interpreter itself maps ~30 MB); CPU seconds are a backstop to the wall clock."""

    seconds: float = 5.0
    memory_bytes: int = 512 << 20
    max_reply_bytes: int = 64 << 20


# A panic in the Rust side of tokenizers (a hostile regex) is an error reply, not a backtrace: with the
# user's RUST_BACKTRACE=1 printing it took ~1.1 s, past a tokenizer child's 1 s limit.
NO_BACKTRACE = {"RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}
STARTUP_SECONDS = 60.0  # an interpreter and a worker's imports; no input has been sent yet
READY = b"\n"  # the child's first byte on stdout (workers/_serve.py); JSON allows it before the reply


def run_worker(name: str, request: dict, limits: Limits = Limits()) -> dict:
    """Send ``request`` to the worker script ``workers/<name>.py`` and return its JSON reply. The worker
    runs once the process's gate (txviz.loading.worker_gate) has a slot and its memory free."""
    script = WORKERS / f"{name}.py"
    if not (name.isidentifier() and not name.startswith("_") and script.is_file()):  # no "../", no _serve
        raise ValueError(f"no isolated worker named {name!r}")
    try:
        with process_gate().hold(limits.memory_bytes, STARTUP_SECONDS) as memory_bytes:
            return _run(script, request, replace(limits, memory_bytes=memory_bytes))
    except GateBusy as busy:
        raise IsolatedError("busy", str(busy)) from None


def _run(script: Path, request: dict, limits: Limits) -> dict:
    payload = json.dumps({"limits": {"memory_bytes": limits.memory_bytes, "cpu_seconds": limits.seconds + 1},
                          "request": request})
    with subprocess.Popen([sys.executable, "-I", str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env={**os.environ, **NO_BACKTRACE}) as child:
        if _started(child):
            try:
                stdout, stderr = child.communicate(payload.encode(), timeout=limits.seconds)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                raise IsolatedError("timeout", f"stopped after {limits.seconds:g} s") from None
        else:  # it died or hung before reading anything: say how
            child.kill()
            stdout, stderr = child.communicate()
            if child.returncode == -signal.SIGKILL and not stderr:
                raise IsolatedError("timeout", f"the worker did not start within {STARTUP_SECONDS:g} s")
    return _reply(subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr), limits)


def _started(child: subprocess.Popen) -> bool:
    """Wait for the child's READY byte (at most STARTUP_SECONDS); False if it exited or hung first."""
    ready, _, _ = select.select([child.stdout], [], [], STARTUP_SECONDS)
    return bool(ready) and os.read(child.stdout.fileno(), 1) == READY


def _reply(done: subprocess.CompletedProcess, limits: Limits) -> dict:
    if done.returncode < 0:  # killed by a signal: SIGXCPU/SIGKILL from the CPU limit, SIGSEGV, …
        raise IsolatedError("killed", f"the worker was killed by signal {-done.returncode}")
    if len(done.stdout) > limits.max_reply_bytes:
        raise IsolatedError("refused", f"the reply is larger than {limits.max_reply_bytes:,} bytes")
    try:
        reply = json.loads(done.stdout or b"null")
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        last = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        kind = "memory" if "MemoryError" in last[0] else "crash"
        raise IsolatedError(kind, f"the worker failed (exit {done.returncode}): {last[0][:300]}")
    if "error" in reply:
        raise IsolatedError(reply.get("kind", "refused"), str(reply["error"])[:500])
    return reply
