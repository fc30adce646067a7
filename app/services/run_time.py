"""How long a long run of the app will take here, now, and how long it has left once it runs.

Before the click: the run's work counted in passes of one prompt (txviz.causal.cost for the causal test,
one pass per sentence for the coreference set) times what one pass costs inside the run's own work unit,
timed on this server at this moment: a batch of the kind the run makes (a quarter of its batch size, the
capture it asks for, the thread rule it runs under, txviz.threads), divided by its sequences. Times a
factor for what the unit leaves out (the run resumes its passes from the first layer they change, pads its
batches, and makes a few unbatched passes): each finished run records its time against its passes timed
so, and the median of the last five runs of that kind and model is used; before any run, a factor
measured on this project's machine (2-core AMD EPYC).

Why a batch and not one forward: the run's batches meet the machine's load differently from one short
forward (a batch holds its threads longer, at the barrier where a busy core stalls them), so a single
forward's time scaled by a fixed factor read a quiet coreference run 21% short and one under four busy
processes 37% short (causal test: 33% and 41%). And why not the unit's wall time alone on a busy machine:
a process that was idle gets the cores first for a moment (the scheduler's credit for sleeping), so a
second's sample ran 3.2× its CPU seconds where the 3-minute run it stood for ran 7.1× (load 9, 2 cores);
the unit's CPU seconds times the run's fair share of the cores under the load now is the larger there. A FLOP count at a configured speed read 46.1 s for a
12.1 s causal test: the speed depends on the model, the machine and its load, which only a measurement
here sees.

While it runs: ``remaining_seconds`` moves the estimate toward the pace of the batches done so far
(elapsed ÷ fraction done), the more so the further the run is, so the "about N s left" a page shows
follows the run's own pace.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

from app.services.heads import COREF_BATCH
from txviz.causal.patching import DEFAULT_CHUNK
from txviz.threads import PROCESS_THREADS, others_running, threads_for_this_run
from txviz.loading.loaded import LoadedModel


@dataclass(frozen=True)
class WorkUnit:
    """One batch as a kind of run makes it: ``batch`` sequences, with the ``capture`` it asks for."""
    batch: int
    capture: tuple[str, ...] = ()


# A quarter of the run's batch: under load a whole one took 16 s to time (two of them, on every opening of
# the tab once a minute); the factor carries what a full batch does better.
RUN_UNITS = {"coref": WorkUnit(COREF_BATCH // 4, ("attn_probs",)),  # sentences traced with their maps
             "causal": WorkUnit(DEFAULT_CHUNK // 4),  # the sweeps' variants, batched plain forwards
             "circuit": WorkUnit(1)}  # its factor was measured against one forward
# Run time ÷ its passes timed in its unit, before any run here: CPU seconds of the run over those of its unit,
# which the load moves far less than wall time (SmolLM2, one thread, 2-core AMD EPYC at load 8-10, 2026-12-06:
# coreference set 8.64 s for 240 passes of 0.0766 s, 0.47; causal test on the trophy pair 24.5 s for 278 passes
# of 0.0859 s, 1.03). The circuit's unit is one forward:
FIRST_RATIO = {"causal": 1.0, "coref": 0.47,
               "circuit": 0.7}  # SmolLM2's trophy pair: 11 CPU s for 102 passes counted by txviz.circuit.cost of 0.15 s
KEPT_RATIOS = 5
UNIT_REPEATS = 3  # the median of three: one batch caught in a burst of other work does not set it
PRIOR_FRACTION = 0.25  # the estimate weighs as much as a quarter of the run seen (remaining_seconds)


def wall_and_cpu() -> tuple[float, float]:
    """Wall seconds, and CPU seconds of this thread (one torch thread computes there; with more the
    CPU figure is short, and the wall time, taken where cores are free, is the larger)."""
    return time.perf_counter(), time.thread_time()


def load_slowdown(threads: int) -> float:
    """How much longer than its CPU seconds a run of ``threads`` threads takes with the machine as busy as
    it is now and over the last minute (txviz.threads: the run queue, the load average): its fair share of
    the cores when they are oversubscribed, else 1."""
    busy = max(others_running(), os.getloadavg()[0] - PROCESS_THREADS)
    cpus = os.cpu_count() or 1
    return max(1.0, (busy + threads) / cpus)


def unit_seconds(loaded: LoadedModel, n_tokens: int, unit: WorkUnit, repeats: int = UNIT_REPEATS, *,
                 clock: Callable[[], tuple[float, float]] = wall_and_cpu,
                 slowdown: Callable[[int], float] | None = None) -> float:
    """Seconds per sequence of one ``unit`` batch of ``n_tokens``-token sequences, under the run's thread
    rule: the median of ``repeats`` batches' wall time, or, when the machine is busier than that, their CPU
    seconds times the slowdown the load now puts on a run of that many threads (``load_slowdown``)."""
    from txviz.capture.trace import trace

    ids = torch.zeros(max(int(unit.batch), 1), max(int(n_tokens), 1), dtype=torch.long)
    walls, cpus = [], []
    with threads_for_this_run(), torch.no_grad():
        threads = torch.get_num_threads()
        for _ in range(repeats):
            started = clock()
            if unit.capture:
                trace(loaded.model, ids, capture=unit.capture)
            else:
                loaded.model(ids, last_only=True)
            ended = clock()
            walls.append(ended[0] - started[0])
            cpus.append(ended[1] - started[1])
    by_load = statistics.median(cpus) * (slowdown or load_slowdown)(threads)
    return max(statistics.median(walls), by_load) / ids.shape[0]


def ratio(kept: tuple[float, ...] | None, kind: str) -> float:
    """The factor to use: the median of the runs kept, else the first one measured on this project's machine."""
    return statistics.median(kept) if kept else FIRST_RATIO[kind]


def kept_ratios(kept: tuple[float, ...] | None, seconds: float, passes: float, one_pass: float) -> tuple[float, ...]:
    """``kept`` with the factor of a run that took ``seconds`` for ``passes`` passes of ``one_pass`` seconds each."""
    return ((kept or ())[-(KEPT_RATIOS - 1):]) + (seconds / max(passes * one_pass, 1e-9),)


def remaining_seconds(estimate_s: float | None, elapsed_s: float, fraction: float) -> float | None:
    """Seconds a run has left after ``elapsed_s`` with ``fraction`` of its work done: the work left at the
    pace of a projected total, which counts the estimate as PRIOR_FRACTION of the run already seen at the
    estimated pace beside the work actually done: (PRIOR_FRACTION·estimate + elapsed) ÷ (PRIOR_FRACTION +
    fraction). Early on it is the estimate; as batches finish, their pace takes over; time passing with
    no progress lengthens it. None when there is nothing to go on (no estimate, nothing done)."""
    fraction = min(max(fraction, 0.0), 1.0)
    if fraction >= 1.0:
        return 0.0
    if estimate_s is None:
        return elapsed_s * (1.0 - fraction) / fraction if fraction > 0 else None
    total = (PRIOR_FRACTION * estimate_s + elapsed_s) / (PRIOR_FRACTION + fraction)
    return (1.0 - fraction) * total
