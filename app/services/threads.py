"""How many torch threads a long computation of the app gets: all the process has while the machine
has a core free, one while it is oversubscribed (the page's trace, the causal report)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import torch

PROCESS_THREADS = torch.get_num_threads()  # what the process was started with (all cores by default)


def threads_for_load(default: int, load: float, cpus: int) -> int:
    """torch's intra-op threads for a run now: ``default`` while the machine has a core free, one when
    it is oversubscribed (1-minute load ≥ cores). Every OpenMP parallel region waits at a barrier for
    its slowest thread, and on a loaded machine that thread is often descheduled: a 64-token trace of
    SmolLM2 took a median 7.1 s on 2 threads and 0.64 s on one at load 10 on 2 cores (issue 14)."""
    return 1 if load >= cpus else default


@contextmanager
def threads_for_this_run():
    """torch.set_num_threads(threads_for_load(...)) for the block, then the process's own count again
    (read once at import, so two sessions' runs that overlap cannot leave one thread set for good)."""
    torch.set_num_threads(threads_for_load(PROCESS_THREADS, os.getloadavg()[0], os.cpu_count() or 1))
    try:
        yield
    finally:
        torch.set_num_threads(PROCESS_THREADS)
