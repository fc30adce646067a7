"""How many torch threads a long computation gets, in the app and on the command line (coref, patch,
circuit): as many as there are cores that no other
process is using right now (at least one, at most what the process has), decided when the run starts
and again after each of its batches (txviz.batches), so a run that starts on a quiet machine and meets
load half-way drops to one thread, and the reverse.

Why not the 1-minute load average: it lags a minute behind the machine, and it counts this process's
own threads, so one long run on a quiet machine raised it to the core count and sent the next run to one
thread (and a run started just as other work began got two threads and stalled). Why it matters: every
OpenMP parallel region waits at a barrier for its slowest thread, and on a busy machine that thread is
often descheduled: on 2 cores with 4 other busy processes (AMD EPYC), 80 sentences of the coreference set
took 21–68 s on 2 threads and 4.3 s on one; a 64-token trace 7.1 s against 0.64 s at load 10.
"""

from __future__ import annotations

import os
import statistics
from contextlib import contextmanager
from pathlib import Path

import torch

from txviz.batches import between_batches

PROCESS_THREADS = torch.get_num_threads()  # what the process was started with (all cores by default)
SAMPLES = 3  # readings of the run queue: one reading catches a process in passing


def threads_for_load(default: int, busy: float, cpus: int) -> int:
    """torch's intra-op threads for a run now: the cores ``busy`` other tasks leave free, between 1 and ``default``."""
    return max(1, min(default, cpus - int(round(busy))))


def _own_running() -> int:
    """This process's threads that are running or runnable now (its OpenMP workers and the server's included)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        count += stat[stat.rindex(")") + 2] == "R"
    return count


def _run_queue() -> int:
    """Tasks of every process running or waiting for a core now (the 4th field of /proc/loadavg, "R/total")."""
    return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])


def others_running() -> float:
    """Tasks of other processes running or waiting for a core now (Linux's run queue, less this process's
    own), the median of a few readings; the 1-minute load average where /proc cannot tell."""
    try:
        readings = [max(_run_queue() - _own_running(), 0) for _ in range(SAMPLES)]  # no sleep between:
        return float(statistics.median(readings))  # on a busy machine a 1 ms sleep took up to 200 ms
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0]


def threads_now() -> int:
    """The run queue now, or the last minute's load beyond what this process's own threads can add, whichever
    is busier: a moment's free core under sustained load does not send a batch to two threads (measured: the
    run queue alone made the causal test 131 s against 95 s on the load-average rule at load 10)."""
    busy = max(others_running(), os.getloadavg()[0] - PROCESS_THREADS)
    return threads_for_load(PROCESS_THREADS, busy, os.cpu_count() or 1)


@contextmanager
def threads_for_this_run():
    """torch.set_num_threads(threads_now()) for the block, decided again after each batch of the library's
    loops inside it, then the process's own count again (read once at import, so two sessions' runs that
    overlap cannot leave one thread set for good)."""
    torch.set_num_threads(threads_now())

    def retune(done: int, total: int) -> None:
        wanted = threads_now()
        if wanted != torch.get_num_threads():
            torch.set_num_threads(wanted)

    try:
        with between_batches(retune):
            yield
    finally:
        torch.set_num_threads(PROCESS_THREADS)
