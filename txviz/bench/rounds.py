"""How a timing worker samples: methods timed round after round, each round in a rotated order, until
every method has been sampled long enough and their per-round ratios to the plain forward agree.

Short calls get more rounds: at 64 tokens a forward takes ~0.2 s on one thread, and three rounds read the
trace/plain ratio as 1.23 on a quiet machine (2026-12-01) where 10-12 rounds read 1.07-1.13 under load: a
10% target needs more samples than that. Rounds go on until every method has been timed for
``min_sampled_s`` in all (at most ``max_rounds`` rounds); long prompts keep ``repeats``, unless the
per-round ratios to the plain forward spread wider than ``wide_spread`` (interquartile range over median;
half the 10% margin of the target): then rounds go on while each method has been timed less than
``max_spread_s``.

The clock is a parameter (``measure`` by default: wall seconds, CPU seconds and minor page faults of one
call), so a test can hand in calls that "take" a known time.
"""

from __future__ import annotations

import resource
import statistics
import time
from dataclasses import dataclass
from typing import Callable

Clock = Callable[[Callable[[], object]], tuple[float, float, int]]  # one call -> (wall s, CPU s, minor faults)


@dataclass(frozen=True)
class Sampling:
    """When rounds stop (see the module docstring)."""
    min_sampled_s: float = 3.0
    max_rounds: int = 30
    wide_spread: float = 0.05
    max_spread_s: float = 45.0


SAMPLING = Sampling()


def measure(function: Callable[[], object]) -> tuple[float, float, int]:
    """One call's wall seconds, CPU seconds (user + sys) and minor page faults (pages the process had to
    be handed: fresh memory, zeroed by the kernel)."""
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    result = function()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    del result
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_minflt - before.ru_minflt


def rounds(methods: dict[str, Callable[[], object]], repeats: int, *, clock: Clock = measure,
           sampling: Sampling = SAMPLING) -> tuple[dict[str, list[tuple]], int]:
    """(wall s, CPU s, minor page faults) of each call, round after round, each round in a rotated order
    so no method always follows the same one; as many rounds as ``needs_more`` asks."""
    samples: dict[str, list[tuple]] = {m: [] for m in methods}
    order, repeat = list(methods), 0
    while repeat < repeats or needs_more({m: [s[0] for s in samples[m]] for m in methods}, repeat,
                                         {m: [s[1] for s in samples[m]] for m in methods}, sampling):
        for method in order[repeat % len(order):] + order[:repeat % len(order)]:  # rotate: no fixed position
            samples[method].append(clock(methods[method]))
        repeat += 1
    return samples, repeat


def needs_more(wall: dict[str, list[float]], rounds: int, cpu: dict[str, list[float]] | None = None,
               sampling: Sampling = SAMPLING) -> bool:
    if rounds >= sampling.max_rounds:
        return False
    sampled = min(sum(samples) for samples in wall.values())
    if sampled < sampling.min_sampled_s:
        return True
    if cpu is None or "plain" not in cpu or sampled >= sampling.max_spread_s:
        return False
    return any(spread(cpu[m], cpu["plain"]) > sampling.wide_spread for m in cpu if m != "plain")


def spread(seconds: list[float], plain: list[float]) -> float:
    """How widely a method's per-round ratios to the plain forward of the same round spread: the
    interquartile range over the median (with fewer than four rounds, the whole range)."""
    per_round = [s / p for s, p in zip(seconds, plain) if p > 0]
    if len(per_round) < 2:
        return 0.0
    if len(per_round) >= 4:
        low, high = statistics.quantiles(per_round, n=4, method="inclusive")[::2]
    else:
        low, high = min(per_round), max(per_round)
    median = statistics.median(per_round)
    return (high - low) / median if median > 0 else 0.0  # a method too fast for the CPU clock has no spread to read
