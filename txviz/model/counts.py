"""What a ModelConfig costs, counted from its shapes without building it: parameters (all of them, and
those one token runs through) and forward FLOPs per token. The KV bytes a token adds sit beside this, in
``txviz.model.kv_cache``.

Parameters are exactly ``sum(p.numel() for p in Decoder(config).parameters())`` (tests/model). FLOPs
count 2 per multiply-add of the weight matrices plus QKᵀ and A·V over the keys attended (PaLM's
2N + 4·L·H·D·n, Chowdhery et al. 2022, appendix B); norms, softmax and activations are left out (under
1% here). A MoE keeps every expert in memory but runs its router and top-k experts per token.
"""

from __future__ import annotations

from txviz.config import ModelConfig


# ---- parameters -----------------------------------------------------------------------------------
def _expert_params(c: ModelConfig) -> int:
    gated = c.ffn != "gelu_mlp"  # SwiGLU, GeGLU: gate, up, down | GELU MLP: up, down
    matrices = 3 if gated else 2
    bias = (2 * c.ffn_hidden + c.d_model if gated else c.ffn_hidden + c.d_model) if c.mlp_bias else 0
    return matrices * c.d_model * c.ffn_hidden + bias


def _attention_params(c: ModelConfig) -> int:
    q_width, kv_width = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    weights = c.d_model * (q_width + 2 * kv_width) + q_width * c.d_model
    return weights + (q_width + 2 * kv_width if c.qkv_bias else 0) + (c.d_model if c.out_bias else 0)


def _qk_norm_params(c: ModelConfig, per_feature: int) -> int:
    """QK-norm on q and on k: the config's norm over each head's D, or over all heads' H·D and Hkv·D."""
    if not c.qk_norm:
        return 0
    widths = (c.head_dim, c.head_dim) if c.qk_norm_scope == "head" else (c.n_heads * c.head_dim,
                                                                          c.n_kv_heads * c.head_dim)
    return per_feature * sum(widths)


def _block_norms(c: ModelConfig) -> int:
    """Norms of width d_model in a block: the pre-norms (one with shared_block_norm), the post-norms."""
    pre = (1 if c.shared_block_norm else 2) if c.pre_norm else 0
    return pre + (2 if c.sandwich_norm else 0)


def _params(c: ModelConfig, experts_used: int) -> int:
    per_feature = 2 if c.norm == "layernorm" and c.norm_bias else 1  # a LayerNorm's bias (not MPT's)
    norm = c.d_model * per_feature
    ffn = _expert_params(c) if not c.is_moe else c.d_model * c.n_experts + experts_used * _expert_params(c)
    layer = _block_norms(c) * norm + _qk_norm_params(c, per_feature) + _attention_params(c) + ffn
    embeddings = c.vocab_size * c.d_model * (1 if c.tie_embeddings else 2)
    positions = c.max_seq_len * c.d_model if c.positions == "learned" else 0
    head_bias = c.vocab_size if c.lm_head_bias else 0
    return (embeddings + positions + head_bias + c.n_layers * layer
            + norm * (2 if c.embed_norm else 1))  # final (+ BLOOM's)


def count_params(config: ModelConfig) -> int:
    """Exactly ``sum(p.numel() for p in Decoder(config).parameters())``, without building it."""
    return _params(config, config.n_experts)


def count_active_params(config: ModelConfig) -> int:
    """Parameters one token runs through: a MoE counts its router and top_k experts per layer."""
    return _params(config, config.top_k if config.is_moe else 0)


def non_embedding_params(config: ModelConfig) -> int:
    """Parameters minus the token embedding/unembedding and a learned position table (Kaplan et al.
    2020's N)."""
    embeddings = config.vocab_size * config.d_model * (1 if config.tie_embeddings else 2)
    positions = config.max_seq_len * config.d_model if config.positions == "learned" else 0
    return count_params(config) - embeddings - positions


# ---- FLOPs per token ------------------------------------------------------------------------------
def expert_matmul_params(config: ModelConfig) -> int:
    """Weights of one FFN (or one expert): gate, up, down (SwiGLU) or up, down (GELU MLP)."""
    return (2 if config.ffn == "gelu_mlp" else 3) * config.d_model * config.ffn_hidden


def projection_flops_per_token(config: ModelConfig) -> int:
    """Q, K, V and output projections of one layer: 2 · d · (H·D + 2·Hkv·D) + 2 · H·D · d."""
    q_width, kv_width = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    return 2 * (config.d_model * (q_width + 2 * kv_width) + q_width * config.d_model)


def ffn_flops_per_token(config: ModelConfig) -> int:
    """One layer's FFN: the dense FFN, or the router plus the top-k experts a token runs through."""
    if not config.is_moe:
        return 2 * expert_matmul_params(config)
    return 2 * (config.d_model * config.n_experts + config.top_k * expert_matmul_params(config))


def attention_flops_per_token(config: ModelConfig, context: int) -> int:
    """One layer's QKᵀ and A·V for a query attending ``context`` keys (a sliding window caps them):
    2 · 2 · H · D · keys; with layers of different windows (Gemma 2/3), the mean over layers."""
    keys = sum(min(context, w) if w else context for w in config.layer_windows)
    return 4 * config.n_heads * config.head_dim * keys // config.n_layers


def flops_per_token(config: ModelConfig, context: int = 0) -> int:
    """Forward FLOPs of one token attending ``context`` keys: every layer's projections, attention and
    (active) FFN, and the unembedding. With context 0 it is 2 × the weights a token multiplies by."""
    layer = projection_flops_per_token(config) + ffn_flops_per_token(config) + attention_flops_per_token(config, context)
    return config.n_layers * layer + 2 * config.d_model * config.vocab_size
