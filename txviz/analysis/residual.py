"""The residual stream of a trace, read back: how large it is per token after the embedding
and each layer, and how closely a block recomputed from its input matches the model's own output."""

from __future__ import annotations

import numpy as np
import torch


def stream_norms(resid: torch.Tensor) -> np.ndarray:
    """(L+1, T) L2 norm of every token's residual vector; ``resid`` is (L+1, T, d)."""
    return resid.float().norm(dim=-1).numpy()


def largest_difference(expected: torch.Tensor, recomputed: torch.Tensor) -> float:
    return float((expected - recomputed).abs().max())
