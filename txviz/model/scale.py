"""Fixed multipliers a few families put where others have none (Granite, IBM 2024, after µP's
multipliers, Yang et al. 2021): each sublayer's output times ``residual_scale`` before it joins the
residual, and the logits divided by ``logit_divisor``. A config without them gets the identity, picked
once in ``__init__`` (as for soft-capping), so forward code applies "the scale" without asking. Plain
callables: nothing to load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from txviz.model.softcap import no_cap

TensorMap = Callable[[torch.Tensor], torch.Tensor]


def identity(x: torch.Tensor) -> torch.Tensor:
    return x


@dataclass(frozen=True)
class Multiply:
    factor: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


@dataclass(frozen=True)
class Divide:
    divisor: float

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x / self.divisor  # the reference divides (Granite's logits / logits_scaling)


@dataclass(frozen=True)
class Then:
    first: TensorMap
    second: TensorMap

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


def make_multiply(factor: float) -> TensorMap:
    return identity if factor == 1.0 else Multiply(factor)


def make_divide(divisor: float) -> TensorMap:
    return identity if divisor == 1.0 else Divide(divisor)


def then(first: TensorMap, second: TensorMap) -> TensorMap:
    """``second(first(x))``, without a wrapper when either is the identity."""
    if first in (identity, no_cap):
        return second
    return first if second in (identity, no_cap) else Then(first, second)
