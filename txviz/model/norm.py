"""Normalization layers of a pre-norm block: RMSNorm (Zhang & Sennrich 2019) and LayerNorm.

Both compute in float32 and cast back, as the reference implementations do, so bf16/fp16 models keep
the reference's numbers.
"""

from __future__ import annotations

import torch
from torch import nn

from txviz.config import ModelConfig


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) · w: no mean subtraction, no bias. Gemma's (1 + w) form is this with
    the 1 folded into w by the loaders (txviz.config); in fp32 the product is the same either way."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class LayerNorm(nn.Module):
    """(x − mean) / sqrt(var + eps) · w + b, as in GPT-2; without b where ``bias`` is False (MPT)."""

    def __init__(self, dim: int, eps: float, bias: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


def make_norm(config: ModelConfig) -> nn.Module:
    if config.norm == "layernorm":
        return LayerNorm(config.d_model, config.norm_eps, config.norm_bias)
    return RMSNorm(config.d_model, config.norm_eps)


def make_optional_norm(config: ModelConfig, wanted: bool) -> nn.Module:
    """The config's norm where ``wanted`` (Gemma's post-norms), else the identity: picked once here so
    forward stays one line either way."""
    return make_norm(config) if wanted else nn.Identity()
