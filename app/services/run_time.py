"""How long a long run of the app will take here, now: its work counted in forward passes of one prompt
(txviz.causal.cost for the causal test, one pass per sentence for the coreference set) times the time
one such pass takes on this server at this moment, under the thread rule the run will use
(txviz.threads), times how much cheaper a pass is inside the run than alone (the run batches its
passes and resumes them from the first layer they change).

That last factor is measured: each finished run records its time against the time its passes would
take alone, and the median of the last five runs of that kind and model is used; before any run, a
factor measured on this project's machine (2-core AMD EPYC). A FLOP count at a configured speed read
46.1 s for a 12.1 s causal test on SmolLM2 and 27.5 s for 12.8 s on Gemma: the speed depends on the
model, the machine and its load, which only a measurement here sees.
"""

from __future__ import annotations

import statistics
import time

import torch

from txviz.threads import threads_for_this_run
from txviz.loading.loaded import LoadedModel

FIRST_RATIO = {"causal": 0.35, "coref": 0.17,  # run time ÷ its passes timed alone, measured on this project's machine
               "circuit": 0.7}  # SmolLM2's trophy pair: 11 CPU s for 102 passes counted by txviz.circuit.cost of 0.15 s
KEPT_RATIOS = 5


def one_pass_seconds(loaded: LoadedModel, n_tokens: int, repeats: int = 3) -> float:
    """The median time of a plain forward of ``n_tokens`` tokens (no capture), under the run's thread rule."""
    ids = torch.zeros(1, max(int(n_tokens), 1), dtype=torch.long)
    times = []
    with threads_for_this_run(), torch.no_grad():
        for _ in range(repeats):
            started = time.perf_counter()
            loaded.model(ids, last_only=True)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def ratio(kept: tuple[float, ...] | None, kind: str) -> float:
    """The factor to use: the median of the runs kept, else the first one measured on this project's machine."""
    return statistics.median(kept) if kept else FIRST_RATIO[kind]


def kept_ratios(kept: tuple[float, ...] | None, seconds: float, passes: float, one_pass: float) -> tuple[float, ...]:
    """``kept`` with the factor of a run that took ``seconds`` for ``passes`` passes of ``one_pass`` seconds each."""
    return ((kept or ())[-(KEPT_RATIOS - 1):]) + (seconds / max(passes * one_pass, 1e-9),)
