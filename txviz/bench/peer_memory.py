"""A peer-benchmark worker's memory ceiling, so a run too big for the machine fails in its own process with
a sentence rather than waking the kernel's out-of-memory killer (which may pick another process).

``cap`` lowers the process's data limit (``RLIMIT_DATA``: its heap and private writable mappings, where
every tensor lives) to what it holds now plus what the machine has available less a margin; an
allocation past it fails at once (``RuntimeError: ... can't allocate memory``, or ``MemoryError``), and
``guarded`` turns that failure into the result ``out_of_memory`` with a message naming the side, the
length, the estimated need and the ceiling. Linux only; elsewhere nothing is capped.
"""

from __future__ import annotations

import re
import resource
from typing import Callable

MARGIN_BYTES = 1 << 30  # left to the rest of the machine
NAMES = {"transformer-lens": "TransformerLens", "txviz": "txviz", "plain": "the plain forward"}


def proc_kib(path: str, field: str) -> int | None:
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def available_bytes() -> int | None:
    kib = proc_kib("/proc/meminfo", "MemAvailable")
    return None if kib is None else kib * 1024


def cap(headroom: int | None = None) -> int | None:
    """Limit the process's data to what it has plus ``headroom`` (default: available memory less the
    margin); the new limit in bytes, None where it cannot be set."""
    held = proc_kib("/proc/self/status", "VmData")
    if headroom is None:
        available = available_bytes()
        headroom = None if available is None else max(0, available - MARGIN_BYTES)
    if held is None or headroom is None:
        return None
    limit = held * 1024 + headroom
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError):
        return None
    return limit


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and ("can't allocate memory" in str(error) or "out of memory" in str(error)))


def message(side: str, tokens: int, needs: int | None, limit: int | None, error: BaseException) -> str:
    asked = re.search(r"allocate (\d+) bytes", str(error))
    parts = [f"needs ~{needs / 2**30:.1f} GiB" if needs else None,
             f"the process could hold {limit / 2**30:.1f} GiB" if limit else None,
             f"an allocation of {int(asked.group(1)) / 2**30:.2f} GiB failed" if asked else None]
    detail = "; ".join(p for p in parts if p)
    return f"{NAMES.get(side, side)} ran out of memory at {tokens} tokens" + (f" ({detail})" if detail else "")


def guarded(function: Callable[[], dict], *, side: str, tokens: int, needs: int | None,
            limit: int | None) -> dict:
    """``function``'s result, or where it ran out of memory the failure as a result."""
    try:
        return function()
    except (MemoryError, RuntimeError) as error:
        if not is_out_of_memory(error):
            raise
        return {"side": side, "tokens": tokens, "out_of_memory": True,
                "message": message(side, tokens, needs, limit, error), "limit_bytes": limit}
