"""Soft-capping (Gemma 2, Team Gemma 2024): c·tanh(x/c) keeps attention scores and final logits inside
(−c, c) while leaving small values almost unchanged. A config without a cap gets the identity, picked
once in ``__init__``, so forward code applies "the cap" without asking whether there is one. Plain
callables, not modules: nothing to load, and no extra part for a device map to name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class SoftCap:
    cap: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x / self.cap) * self.cap  # the reference's order: divide, tanh, multiply


def no_cap(x: torch.Tensor) -> torch.Tensor:
    return x


def make_softcap(cap: float | None) -> Callable[[torch.Tensor], torch.Tensor]:
    return no_cap if cap is None else SoftCap(cap)
