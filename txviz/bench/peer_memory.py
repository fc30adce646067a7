"""A peer-benchmark worker's memory ceiling, so a run too big for the machine fails in its own process with
a sentence rather than waking the kernel's out-of-memory killer (which may pick another process).

``cap`` lowers the process's data limit (``RLIMIT_DATA``: its heap and private writable mappings, where
every tensor lives) to what it holds now plus what the machine has available less a margin (the
worker calls it once its model is loaded, so loading's passing copies and a mapped weights file, which
RLIMIT_DATA counts though the page cache holds it, do not eat the room the call gets); an
allocation past it fails at once (``RuntimeError: ... can't allocate memory``, or ``MemoryError``), and
``guarded`` turns that failure into the result ``out_of_memory`` with a message naming the side, the
length, the estimated need and the ceiling; any other error still fails the run as it is. Linux only;
elsewhere nothing is capped.
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
    margin); the bytes it may still add, None where no limit could be set."""
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
    return limit - held * 1024


OUT_OF_MEMORY = ("can't allocate memory", "cannot allocate memory", "out of memory")  # torch's, ENOMEM's


def is_out_of_memory(error: BaseException) -> bool:
    """An allocation refused: MemoryError, torch's allocator, or a failed mmap (a weights file mapped
    while loading counts against the ceiling too)."""
    text = str(error).lower()
    return isinstance(error, MemoryError) or (
        isinstance(error, (RuntimeError, OSError)) and any(words in text for words in OUT_OF_MEMORY))


def message(side: str, tokens: int, needs: int | None, room: int | None, error: BaseException) -> str:
    asked = re.search(r"allocate (\d+) bytes", str(error))
    parts = [f"needs ~{needs / 2**30:.1f} GiB in all" if needs else None,
             f"{room / 2**30:.1f} GiB could be added to the loaded model" if room is not None else None,
             f"an allocation of {int(asked.group(1)) / 2**30:.2f} GiB failed" if asked else None]
    detail = "; ".join(p for p in parts if p)
    return f"{NAMES.get(side, side)} ran out of memory at {tokens} tokens" + (f" ({detail})" if detail else "")


def guarded(function: Callable[[], dict], *, side: str, tokens: int, needs: int | None,
            room: int | None) -> dict:
    """``function``'s result, or where it ran out of memory the failure as a result (``room``: what
    ``cap`` let the process add)."""
    try:
        return function()
    except (MemoryError, RuntimeError, OSError) as error:
        if not is_out_of_memory(error):
            raise
        return {"side": side, "tokens": tokens, "out_of_memory": True,
                "message": message(side, tokens, needs, room, error), "room_bytes": room}
