"""The Positions page's runs: per-token loss of a text under a RoPE scaling (and how long it took),
the speed of a short forward (what turns FLOPs into seconds before any run was timed), and the
layer-0 scores of a prompt with and without the model's positions (the permutation check)."""

from __future__ import annotations

import time

import numpy as np
import torch

from app.services.texts import shipped_text_ids, shipped_texts
from txviz import limits as limits_
from txviz.analysis.positions.forward_speed import ForwardSpeed, fit_forward_speed
from txviz.loading.loaded import LoadedModel


def scaling_losses(loaded: LoadedModel, ids: torch.Tensor, kind: str, factor: float) -> tuple[np.ndarray, float]:
    """(per-token loss of ``ids`` under one RoPE scaling, seconds it took)."""
    from txviz.analysis.positions.measured import scaling_for, token_losses, variant

    started = time.perf_counter()
    model = loaded.model if kind == "none" else variant(
        loaded.model, rope_scaling=scaling_for(kind, factor, loaded.config.max_seq_len))
    losses = token_losses(model, ids).numpy()
    return losses, time.perf_counter() - started


def forward_seconds(loaded: LoadedModel, n_tokens: int, gflops: float) -> float:
    """Seconds one forward over ``n_tokens`` takes at ``gflops`` (at 1.0: the pass's GFLOPs)."""
    return limits_.trace_estimate(loaded.config, n_tokens, ("logits",), element_bytes=loaded.dtype.itemsize,
                                  gflops=gflops).seconds


def forward_speed(loaded: LoadedModel, sizes: tuple[int, int] = (16, 128), repeats: int = 1) -> ForwardSpeed:
    """A fixed cost per pass plus a rate, fitted to the fastest of ``repeats`` forwards of each of two
    lengths of a shipped text. One of each by default: the page has run the model on its prompt
    already (its weights are paged in), and the first scaling scored replaces this estimate."""
    from txviz.analysis.positions.measured import token_losses

    ids = shipped_text_ids(loaded, next(iter(shipped_texts())), max(sizes))
    lengths = [min(n, len(ids)) for n in sizes]
    fastest = [float("inf")] * len(lengths)
    for _ in range(repeats):
        for i, n in enumerate(lengths):
            started = time.perf_counter()
            token_losses(loaded.model, ids[:n])
            fastest[i] = min(fastest[i], time.perf_counter() - started)
    gflop = [forward_seconds(loaded, n, 1.0) for n in lengths]  # the work each timed pass did
    return fit_forward_speed((gflop[0], fastest[0]), (gflop[1], fastest[1]))


def scaling_seconds(loaded: LoadedModel, n_tokens: int, speed: ForwardSpeed) -> float:
    """Seconds one scaling of ``n_tokens`` takes at ``speed`` (its forward; the variant shares the weights)."""
    return speed.seconds(forward_seconds(loaded, n_tokens, 1.0))


def forward_gflops(loaded: LoadedModel, n_tokens: int = 64, repeats: int = 3) -> float:
    """GFLOP/s a forward of ``n_tokens`` shows here, its fixed cost per pass included."""
    speed = forward_speed(loaded, (min(16, n_tokens - 1), n_tokens), repeats)
    return speed.gflops_at(forward_seconds(loaded, n_tokens, 1.0))


def permutation_check(loaded: LoadedModel, ids: torch.Tensor) -> dict[str, tuple]:
    """Layer-0 score sets of the prompt and shuffled, with the model's positions and with none."""
    from txviz.analysis.positions.measured import layer0_score_sets, variant

    models = {"with the model's positions": loaded.model, "positions removed": variant(loaded.model, positions="none")}
    return {name: layer0_score_sets(model, ids) for name, model in models.items()}
