"""Cached against uncached decoding: the measured time per new token of both runs, and
what both are expected to take from their FLOPs (txviz.limits) before they run."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from txviz import limits
from txviz.config import ModelConfig


def ms_per_token(runs: Mapping[str, object]) -> tuple[list[int], dict[str, np.ndarray]]:
    """(sequence length at each decode step, {run name: milliseconds per token}) of generations that
    took the same steps; the first step is left out: it is the prefill of the whole prompt."""
    series = {name: np.array([s.seconds * 1000 for s in run.steps[1:]]) for name, run in runs.items()}
    positions = [s.position for s in next(iter(runs.values())).steps[1:]]
    return positions, series


def both_runs_seconds(config: ModelConfig, n_prompt: int, n_new: int, *, element_bytes: int, gflops: float) -> float:
    """Seconds expected for generating ``n_new`` tokens twice: with the KV cache, then recomputing."""
    return sum(limits.generation_estimate(config, n_prompt, n_new, element_bytes=element_bytes,
                                          use_cache=use_cache, gflops=gflops).seconds
               for use_cache in (True, False))
