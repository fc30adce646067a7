"""Tiny configs, randomly initialized models and small reference implementations shared by the tests.

The variants cover every choice a ModelConfig offers, so a test parametrized over them meets
every code path, each small enough that a
forward pass takes milliseconds on a CPU.
"""

from __future__ import annotations

import math

import torch

from txviz import Decoder, ModelConfig

BASE = dict(vocab_size=97, d_model=32, n_layers=2, n_heads=4, ffn_hidden=48, max_seq_len=64)

VARIANTS: dict[str, dict] = {
    "mha": dict(),
    "gqa": dict(n_kv_heads=2),
    "mqa": dict(n_kv_heads=1),
    "sliding_window": dict(n_kv_heads=2, sliding_window=5),
    "alibi": dict(positions="alibi"),
    "learned": dict(positions="learned", norm="layernorm", ffn="gelu_mlp", tie_embeddings=True,
                    qkv_bias=True, out_bias=True, mlp_bias=True),
    "no_positions": dict(positions="none"),
    "moe": dict(n_kv_heads=2, n_experts=4, top_k=2),
    "moe_all": dict(n_experts=4, top_k=2, router_norm="all", ffn="gelu_mlp"),
    "yarn": dict(rope_scaling=dict(kind="yarn", factor=4.0, original_max_seq_len=16)),
}


def tiny_config(**overrides) -> ModelConfig:
    return ModelConfig(**{**BASE, **overrides})


def random_decoder(config: ModelConfig, seed: int = 0) -> Decoder:
    """A Decoder whose every parameter is random (norm weights near 1, biases and learned positions
    non-zero), so no part of the computation can hide behind an identity initialization."""
    torch.manual_seed(seed)
    model = Decoder(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif name.endswith("bias") or name == "positions.weight":
                param.copy_(0.1 * torch.randn_like(param))
    return model.eval()


def random_ids(config: ModelConfig, n_tokens: int, seed: int = 0, batch: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (batch, n_tokens), generator=generator)


def rotate_pairs_reference(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """RoPE written as the tutorial's 2×2 rotation R(m·θ_i) on each pair (x_i, x_{i+D/2}), in float64.

    x (..., T, D), positions (T,), inv_freq (D/2,). An independent check of the rotate-half code.
    """
    half = x.shape[-1] // 2
    angle = positions.double()[:, None] * inv_freq.double()[None, :]  # (T, D/2)
    cos, sin = angle.cos(), angle.sin()
    first, second = x.double()[..., :half], x.double()[..., half:]
    return torch.cat([cos * first - sin * second, sin * first + cos * second], dim=-1)


def default_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    """θ_i = theta^(−2i/D), straight from Su et al. (2021)."""
    return torch.tensor([theta ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)


def alibi_slopes_reference(n_heads: int) -> list[float]:
    """Press et al. (2022), written from the paper's description: for n = 2^k heads the slopes are
    2^(−8/n), 2^(−16/n), …, 2^(−8); otherwise those of the largest power of two below n, followed by
    the odd-indexed slopes (1st, 3rd, …) of the sequence for twice that power."""

    def geometric(n: int) -> list[float]:
        return [2 ** (-8 * (h + 1) / n) for h in range(n)]

    closest = 2 ** int(math.floor(math.log2(n_heads)))
    if closest == n_heads:
        return geometric(n_heads)
    return geometric(closest) + geometric(2 * closest)[0::2][: n_heads - closest]
