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
def _expert_params(c: ModelConfig, hidden: int | None = None) -> int:
    """One FFN (or expert) ``hidden`` wide (None: ffn_hidden)."""
    hidden = c.ffn_hidden if hidden is None else hidden
    gated = c.ffn != "gelu_mlp"  # SwiGLU, GeGLU: gate, up, down | GELU MLP: up, down
    matrices = 3 if gated else 2
    bias = (2 * hidden + c.d_model if gated else hidden + c.d_model) if c.mlp_bias else 0
    return matrices * c.d_model * hidden + bias


def _attention_params(c: ModelConfig) -> int:
    q_width, kv_width = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    weights = c.d_model * (q_width + 2 * kv_width) + q_width * c.d_model
    sinks = c.n_heads if c.attn_sinks else 0  # one learned sink logit per head
    return weights + (q_width + 2 * kv_width if c.qkv_bias else 0) + (c.d_model if c.out_bias else 0) + sinks


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


def _ffn_params(c: ModelConfig, layer: int, experts_used: int) -> int:
    """Layer ``layer``'s FFN: dense, or the router (and its bias), ``experts_used`` routed experts and
    the shared expert with its gate, which every token runs through."""
    if not c.is_moe_layer(layer):
        return _expert_params(c)
    router = c.d_model * c.n_experts + (c.n_experts if c.router_bias else 0)
    shared = _expert_params(c, c.shared_expert_hidden) if c.shared_expert_hidden else 0
    shared_gate = c.d_model if c.shared_expert_gate else 0
    return router + experts_used * _expert_params(c, c.expert_width) + shared + shared_gate


def _params(c: ModelConfig, experts_used: int) -> int:
    per_feature = 2 if c.norm == "layernorm" and c.norm_bias else 1  # a LayerNorm's bias (not MPT's)
    norm = c.d_model * per_feature
    layer = _block_norms(c) * norm + _qk_norm_params(c, per_feature) + _attention_params(c)
    ffns = sum(_ffn_params(c, i, experts_used) for i in range(c.n_layers))  # dense or MoE, layer by layer
    embeddings = c.vocab_size * c.d_model * (1 if c.tie_embeddings else 2)
    positions = c.max_seq_len * c.d_model if c.positions == "learned" else 0
    head_bias = c.vocab_size if c.lm_head_bias else 0
    return (embeddings + positions + head_bias + c.n_layers * layer + ffns
            + norm * (2 if c.embed_norm else 1))  # final (+ BLOOM's)


def count_params(config: ModelConfig) -> int:
    """Exactly ``sum(p.numel() for p in Decoder(config).parameters())``, without building it."""
    return _params(config, config.n_experts)


def count_active_params(config: ModelConfig) -> int:
    """Parameters one token runs through: a MoE layer counts its router, top_k experts and any shared
    expert (with its gate)."""
    return _params(config, config.top_k if config.is_moe else 0)


def non_embedding_params(config: ModelConfig) -> int:
    """Parameters minus the token embedding/unembedding and a learned position table (Kaplan et al.
    2020's N)."""
    embeddings = config.vocab_size * config.d_model * (1 if config.tie_embeddings else 2)
    positions = config.max_seq_len * config.d_model if config.positions == "learned" else 0
    return count_params(config) - embeddings - positions


# ---- FLOPs per token ------------------------------------------------------------------------------
def expert_matmul_params(config: ModelConfig, hidden: int | None = None) -> int:
    """Weights of one FFN (or one expert) ``hidden`` wide (None: ffn_hidden): gate, up, down (SwiGLU)
    or up, down (GELU MLP)."""
    return (2 if config.ffn == "gelu_mlp" else 3) * config.d_model * (config.ffn_hidden if hidden is None else hidden)


def projection_flops_per_token(config: ModelConfig) -> int:
    """Q, K, V and output projections of one layer: 2 · d · (H·D + 2·Hkv·D) + 2 · H·D · d."""
    q_width, kv_width = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    return 2 * (config.d_model * (q_width + 2 * kv_width) + q_width * config.d_model)


def layer_ffn_flops_per_token(config: ModelConfig, layer: int) -> int:
    """Layer ``layer``'s FFN: the dense FFN, or the router, the top-k experts a token runs through and
    the shared expert (with its gate) that every token runs through."""
    c = config
    if not c.is_moe_layer(layer):
        return 2 * expert_matmul_params(c)
    shared = expert_matmul_params(c, c.shared_expert_hidden) + (c.d_model if c.shared_expert_gate else 0)
    return 2 * (c.d_model * c.n_experts + c.top_k * expert_matmul_params(c, c.expert_width) + shared)


def total_ffn_flops_per_token(config: ModelConfig) -> int:
    """Every layer's FFN together."""
    return sum(layer_ffn_flops_per_token(config, i) for i in range(config.n_layers))


def ffn_flops_per_token(config: ModelConfig) -> int:
    """One layer's FFN: the dense FFN, or the router plus the experts a token runs through (with dense
    and MoE layers mixed: their mean, rounded down)."""
    return total_ffn_flops_per_token(config) // config.n_layers


def attention_flops_per_token(config: ModelConfig, context: int) -> int:
    """One layer's QKᵀ and A·V for a query attending ``context`` keys (a sliding window caps them):
    2 · 2 · H · D · keys; with layers of different windows (Gemma 2/3), the mean over layers."""
    keys = sum(min(context, w) if w else context for w in config.layer_windows)
    return 4 * config.n_heads * config.head_dim * keys // config.n_layers


def flops_per_token(config: ModelConfig, context: int = 0) -> int:
    """Forward FLOPs of one token attending ``context`` keys: every layer's projections, attention and
    (active) FFN, and the unembedding. With context 0 it is 2 × the weights a token multiplies by."""
    layer = projection_flops_per_token(config) + attention_flops_per_token(config, context)
    return config.n_layers * layer + total_ffn_flops_per_token(config) + 2 * config.d_model * config.vocab_size
