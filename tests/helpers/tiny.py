"""Tiny configs, randomly initialized models and small reference implementations shared by the tests.

The variants cover every choice a ModelConfig offers, so a test parametrized over them meets every code
path, each small enough that a forward pass takes milliseconds on a CPU.
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

# The published families' own choices on the same tiny base, by family: the one table the family tests
# (model, capture, causal, circuit) parametrize over or pick from.
FAMILY_WINDOW = 5  # Gemma's sliding window here: a 13-token prompt is over twice it, so the rings wrap
GEMMA3_KINDS = ("sliding", "sliding", "full", "sliding")
_GEMMA3 = dict(n_layers=4, n_kv_heads=1, head_dim=16, ffn="geglu", layer_types=GEMMA3_KINDS,
               sliding_window=FAMILY_WINDOW, rope_theta=5000.0, rope_local_theta=50.0, qk_norm=True,
               sandwich_norm=True, embed_scale=32 ** 0.5, query_scale=24 ** -0.5, tie_embeddings=True)
_NEOX = dict(norm="layernorm", ffn="gelu_mlp", parallel_block=True, rotary_dims=4, qkv_bias=True, out_bias=True,
             mlp_bias=True)
FAMILY_VARIANTS: dict[str, dict] = {
    # Gemma 2 and 3: per-layer windows, post-norms (sandwich), QK-norm, embedding and query scales, soft-caps
    "gemma3_like": _GEMMA3,
    "gemma3_capped": {**_GEMMA3, "attn_softcap": 1.5, "final_softcap": 2.0},
    "gemma2_like": dict(n_layers=4, n_kv_heads=2, ffn="geglu", layer_types=("sliding", "full") * 2,
                        sliding_window=FAMILY_WINDOW, sandwich_norm=True, embed_scale=32 ** 0.5, query_scale=0.3,
                        attn_softcap=1.5, final_softcap=2.0),
    "gemma_sandwich_capped": dict(sandwich_norm=True, qk_norm=True, n_kv_heads=2, attn_softcap=5.0,
                                  final_softcap=30.0, embed_scale=3.0, query_scale=0.3, ffn="geglu"),
    # BLOOM and MPT: ALiBi (6 heads: the non-power-of-2 slopes), BLOOM's embedding norm, MPT's bias cap
    "bloom_like": dict(norm="layernorm", ffn="gelu_mlp", positions="alibi", n_heads=6, d_model=36, embed_norm=True,
                       qkv_bias=True, out_bias=True, mlp_bias=True, tie_embeddings=True),
    "mpt_like": dict(norm="layernorm", norm_bias=False, ffn="gelu_mlp", gelu_approximate="none", positions="alibi",
                     alibi_bias_max=12.0, query_scale=0.2),
    "embed_norm_alibi": dict(embed_norm=True, norm="layernorm", positions="alibi"),
    # GPT-NeoX and Phi: the parallel block, partial rotary
    "neox_like": _NEOX,
    "neox_sequential": {**_NEOX, "parallel_block": False},
    "parallel_partial_rotary": dict(parallel_block=True, rotary_dims=4, n_kv_heads=2),
    "phi_like_partial_gqa_window": dict(rotary_dims=6, n_kv_heads=2, sliding_window=4),
    "parallel_moe": dict(parallel_block=True, n_experts=4, top_k=2),
    # Qwen3 (per-head QK-norm, a window on one layer), OLMo 2 (post-norms only, QK-norm across heads),
    # SmolLM3 (a NoPE layer, and a sliding one), Phi-1/2 (one-norm parallel block, QK LayerNorm, head bias)
    "qwen3_like": dict(n_kv_heads=2, qk_norm=True, layer_types=("full", "sliding"), sliding_window=FAMILY_WINDOW),
    "olmo2_like": dict(n_kv_heads=2, pre_norm=False, sandwich_norm=True, qk_norm=True, qk_norm_scope="all_heads"),
    "smollm3_like": dict(n_layers=4, n_kv_heads=2, layer_rope=(True, False, True, False), tie_embeddings=True,
                         layer_types=("full", "full", "full", "sliding"), sliding_window=FAMILY_WINDOW),
    "phi12_like": dict(norm="layernorm", ffn="gelu_mlp", parallel_block=True, shared_block_norm=True, rotary_dims=4,
                       qk_norm=True, qkv_bias=True, out_bias=True, mlp_bias=True, lm_head_bias=True),
    # MoE families: Qwen2-MoE (a dense layer, a gated shared expert, gates as the softmax gives them),
    # OLMoE (QK-norm across heads), Granite-MoE (top-k then softmax, its four multipliers)
    "qwen_moe_like": dict(n_layers=3, n_kv_heads=2, qkv_bias=True, n_experts=4, top_k=2, router_norm="all",
                          expert_hidden=16, shared_expert_hidden=40, shared_expert_gate=True, dense_layers=(1,)),
    "olmoe_like": dict(n_kv_heads=2, qk_norm=True, qk_norm_scope="all_heads", n_experts=4, top_k=2, router_norm="all"),
    "granite_moe_like": dict(n_kv_heads=2, n_experts=4, top_k=2, router_order="topk_softmax", embed_scale=3.0,
                             query_scale=0.3, residual_scale=0.5, logit_divisor=2.5),
    # gpt-oss: a learned sink per head, sliding and full layers, untruncated YaRN, a biased top-k-then-softmax
    # router, clamped-SwiGLU experts with biases
    "gpt_oss_like": dict(n_kv_heads=2, attn_sinks=True, layer_types=("sliding", "full"), sliding_window=FAMILY_WINDOW,
                         rope_scaling=dict(kind="yarn", factor=4.0, original_max_seq_len=16, truncate=False),
                         qkv_bias=True, out_bias=True, n_experts=4, top_k=2, router_order="topk_softmax",
                         router_bias=True, ffn="swiglu_clamped", mlp_bias=True, swiglu_limit=0.5),
}


def family_variants(*names: str) -> dict[str, dict]:
    """The named rows of ``FAMILY_VARIANTS``, in that order."""
    return {name: FAMILY_VARIANTS[name] for name in names}


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
    """RoPE written as a 2×2 rotation matrix R(m·θ_i), the textbook form, on each pair (x_i, x_{i+D/2}), in float64.

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
