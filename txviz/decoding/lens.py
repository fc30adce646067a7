"""The logit lens of one token (nostalgebraist 2020): the residual stream after every layer read
through the final norm and the unembedding, as if the model stopped there, and the rank the chosen
token has at each point. The first point whose reading ranks it first is where it was "decided".

Points: 0 is the residual right after the embedding, i the output of layer i − 1 (layers counted
from 0), so the last point, L, is the model's own output: the final soft-cap (Gemma 2) is applied
too, which changes probabilities, never ranks. One (L+1, d) × (d, V) product per step: for a large
vocabulary the one costly part of a step's record, so it runs only when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class LensReading:
    ranks: tuple[int, ...]  # L+1: 1 + how many tokens the lens scores above the chosen one
    probs: tuple[float, ...]  # L+1: the lens' probability of the chosen token
    first_top1_layer: int | None  # the first point ranking it first (None: not even the last)


@torch.inference_mode()
def lens_logits(model, resid: torch.Tensor) -> torch.Tensor:
    """resid (L+1, d) of one position → (L+1, V) float32 logits of the lens at every point."""
    x = resid.to(model.embed.weight.device, model.embed.weight.dtype)
    return model.cap_logits(F.linear(model.final_norm(x), model.unembedding)).float()


@torch.inference_mode()
def lens_reading(model, resid: torch.Tensor, token: int) -> LensReading:
    """The chosen ``token``'s rank and probability through the lens of ``resid`` (L+1, d)."""
    logits = lens_logits(model, resid)  # (L+1, V)
    chosen = logits[:, token:token + 1]  # (L+1, 1)
    ranks = ((logits > chosen).sum(dim=-1) + 1).tolist()
    probs = (chosen[:, 0] - torch.logsumexp(logits, dim=-1)).exp().tolist()
    first = next((point for point, rank in enumerate(ranks) if rank == 1), None)
    return LensReading(ranks=tuple(ranks), probs=tuple(probs), first_top1_layer=first)
