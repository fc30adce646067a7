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


class _AcrossHeads:
    """The norm over every head of a token at once, H·D wide, on q or k laid out (B, H, T, D) (OLMo 2's
    QK-norm, which normalizes the whole projection before it is split into heads)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, t, d = x.shape
        flat = x.transpose(1, 2).reshape(b, t, h * d)  # (B, T, H·D): the projection as it came out
        return super().forward(flat).view(b, t, h, d).transpose(1, 2)  # (B, H, T, D)


class RMSNormAcrossHeads(_AcrossHeads, RMSNorm):
    pass


class LayerNormAcrossHeads(_AcrossHeads, LayerNorm):
    pass


class SharedNorm(nn.Module):
    """Another norm of the block, called again: a norm without parameters of its own (Phi-1/2's FFN reads
    the attention's norm). The norm is kept in a tuple so it is not registered, and saved, twice."""

    def __init__(self, norm: nn.Module):
        super().__init__()
        self.shared = (norm,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared[0](x)  # called, not read: a placement hook sees the norm run


def make_norm(config: ModelConfig, dim: int | None = None) -> nn.Module:
    """The config's norm over ``dim`` features (None: d_model)."""
    dim = config.d_model if dim is None else dim
    if config.norm == "layernorm":
        return LayerNorm(dim, config.norm_eps, config.norm_bias)
    return RMSNorm(dim, config.norm_eps)


def make_qk_norm(config: ModelConfig, n_heads: int) -> nn.Module:
    """QK-norm on q or k (B, ``n_heads``, T, D), before RoPE: the config's norm over each head's D (Gemma 3,
    Qwen3, Phi-1/2) or over all heads' H·D at once (OLMo 2); the identity without QK-norm."""
    if not config.qk_norm:
        return nn.Identity()
    if config.qk_norm_scope == "head":
        return make_norm(config, config.head_dim)
    width = n_heads * config.head_dim
    if config.norm == "layernorm":
        return LayerNormAcrossHeads(width, config.norm_eps, config.norm_bias)
    return RMSNormAcrossHeads(width, config.norm_eps)


def make_optional_norm(config: ModelConfig, wanted: bool) -> nn.Module:
    """The config's norm where ``wanted`` (Gemma's post-norms), else the identity: picked once here so
    forward stays one line either way."""
    return make_norm(config) if wanted else nn.Identity()
