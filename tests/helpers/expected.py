"""What the tests expect: the documented shape of every capture, and the default model's config
(SmolLM2-135M, written out so that tests of costs and estimates need no download)."""

from __future__ import annotations

from txviz import ModelConfig
from txviz.capture.summaries import METRICS

SMOLLM2_135M = ModelConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, ffn_hidden=1536,
                           max_seq_len=8192, rope_theta=100000.0, tie_embeddings=True)


def expected_shapes(config, n_layers: int, t: int) -> dict[str, tuple[int, ...]]:
    """The documented shape of every capture for batch 1, T = S = t, ``n_layers`` captured layers."""
    layer, h, h_kv, d = n_layers, config.n_heads, config.n_kv_heads, config.head_dim
    shapes = {
        "q": (layer, 1, h, t, d), "k": (layer, 1, h_kv, t, d), "v": (layer, 1, h_kv, t, d),
        "q_rot": (layer, 1, h, t, d), "k_rot": (layer, 1, h_kv, t, d),
        "attn_logits": (layer, 1, h, t, t), "attn_scores": (layer, 1, h, t, t), "attn_probs": (layer, 1, h, t, t),
        "head_summaries": (layer, 1, h, t, len(METRICS)),
        "kv_bytes": (layer,), "attn_out": (layer, 1, t, config.d_model), "ffn_out": (layer, 1, t, config.d_model),
        "resid": (config.n_layers + 1, 1, t, config.d_model), "resid_norm": (config.n_layers + 1, 1, t),
        "positions": (t,), "logits": (1, t, config.vocab_size),
    }
    if config.is_moe:
        e, k = config.n_experts, config.top_k
        shapes.update(router_logits=(layer, 1, t, e), router_probs=(layer, 1, t, e),
                      expert_ids=(layer, 1, t, k), expert_gates=(layer, 1, t, k))
    if config.positions == "rope":
        shapes.update(rope_angles=(t, d // 2), rope_cos=(t, d), rope_sin=(t, d))
    if config.positions == "rope" and config.rope_local_theta is not None and any(config.layer_windows):
        shapes.update(rope_local_angles=(t, d // 2), rope_local_cos=(t, d), rope_local_sin=(t, d))
    if config.positions == "alibi":
        shapes["alibi_bias"] = (h, t, t)
    return shapes
