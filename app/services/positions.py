"""The Positions page's runs: per-token loss of a text under a RoPE scaling (and how long it took),
the speed of a short forward (what turns FLOPs into seconds before any run was timed), and the
layer-0 scores of a prompt with and without the model's positions (the permutation check)."""

from __future__ import annotations

import time

import numpy as np
import torch

from app.services.texts import shipped_text_ids, shipped_texts
from txviz import limits as limits_
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
    """Seconds one forward over ``n_tokens`` takes at ``gflops``."""
    return limits_.trace_estimate(loaded.config, n_tokens, ("logits",), element_bytes=loaded.dtype.itemsize,
                                  gflops=gflops).seconds


def forward_gflops(loaded: LoadedModel, n_tokens: int = 64, repeats: int = 3) -> float:
    """GFLOP/s of a forward of ``n_tokens`` of a shipped text: the fastest of ``repeats`` after a
    warm-up (one-time setup and a busy moment on a shared machine are not counted)."""
    from txviz.analysis.positions.measured import token_losses

    ids = shipped_text_ids(loaded, next(iter(shipped_texts())), n_tokens)
    token_losses(loaded.model, ids[:8])
    fastest = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        token_losses(loaded.model, ids)
        fastest = min(fastest, time.perf_counter() - started)
    flops = forward_seconds(loaded, len(ids), 1.0)  # seconds at 1 GFLOP/s = GFLOPs
    return flops / max(fastest, 1e-6)


def permutation_check(loaded: LoadedModel, ids: torch.Tensor) -> dict[str, tuple]:
    """Layer-0 score sets of the prompt and shuffled, with the model's positions and with none."""
    from txviz.analysis.positions.measured import layer0_score_sets, variant

    models = {"with the model's positions": loaded.model, "positions removed": variant(loaded.model, positions="none")}
    return {name: layer0_score_sets(model, ids) for name, model in models.items()}
