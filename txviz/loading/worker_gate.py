"""How many isolated workers (txviz.loading.isolated) run at once in this process, and how much memory they
may map together.

Each worker caps its own address space, but a cap per worker bounds nothing on a shared server where every
session may start one: four hostile encodes at once mapped 3.1 GiB. So a worker first takes its memory
from one budget for the whole process, and one of a few slots; a request waits for both (at most its own
bound, before the worker has read any input), and past that bound it is refused as busy. A worker that asks
for more than the whole budget is given the budget, and runs when no other worker does.

Settings (environment variable, default):
  TXVIZ_WORKERS          2        isolated workers running at once in one process
  TXVIZ_WORKERS_MEMORY   1.5GiB   address space those workers may take together (each on top of its
                                  interpreter's own ~30-100 MB)
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

from txviz.limits import GIB, parse_size

DEFAULT_WORKERS = 2
DEFAULT_MEMORY = 3 * GIB // 2


class GateBusy(Exception):
    """No slot or memory came free within the wait's bound."""


class WorkerGate:
    def __init__(self, slots: int, memory_bytes: int):
        if slots < 1 or memory_bytes < 1:
            raise ValueError(f"a worker gate needs a slot and some memory (got {slots} slots, {memory_bytes} bytes)")
        self.slots, self.memory_bytes = int(slots), int(memory_bytes)
        self._free = threading.Condition()
        self.running, self.memory_in_use = 0, 0

    @contextmanager
    def hold(self, memory_bytes: int, wait_seconds: float) -> Iterator[int]:
        """A slot and ``memory_bytes`` (at most the whole budget) for the block; yields the bytes granted.
        GateBusy when they are not free within ``wait_seconds``."""
        granted = min(int(memory_bytes), self.memory_bytes)
        deadline = time.monotonic() + wait_seconds
        with self._free:
            while self.running >= self.slots or self.memory_in_use + granted > self.memory_bytes:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise GateBusy(f"{self.running} isolated workers are running (at most {self.slots}, "
                                   f"{self.memory_bytes / GIB:.2g} GiB together): try again shortly")
                self._free.wait(left)
            self.running += 1
            self.memory_in_use += granted
        try:
            yield granted
        finally:
            with self._free:
                self.running -= 1
                self.memory_in_use -= granted
                self._free.notify_all()


@lru_cache(maxsize=1)
def process_gate() -> WorkerGate:
    """The gate every isolated worker of this process goes through (settings read once)."""
    slots = os.environ.get("TXVIZ_WORKERS", "").strip()
    memory = os.environ.get("TXVIZ_WORKERS_MEMORY", "").strip()
    try:
        return WorkerGate(int(slots) if slots else DEFAULT_WORKERS, parse_size(memory) if memory else DEFAULT_MEMORY)
    except ValueError as error:
        raise ValueError(f"TXVIZ_WORKERS / TXVIZ_WORKERS_MEMORY: {error}") from None
