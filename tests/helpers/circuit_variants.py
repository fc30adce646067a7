"""Tiny configs for the circuit tests: every variant of tests.helpers.tiny plus the choices whose
graph runs differ most (Gemma's sandwich norms with QK-norm and soft caps, the parallel block with
partial rotary, an embedding norm, Qwen3's, SmolLM3's and Phi-1/2's own, OLMo 2's and OLMoE's QK-norm
across all heads)."""

from __future__ import annotations

from tests.helpers.tiny import FAMILY_VARIANTS, VARIANTS

CIRCUIT_VARIANTS: dict[str, dict] = {
    **VARIANTS,
    "gemma_like": FAMILY_VARIANTS["gemma_sandwich_capped"],
    "parallel": FAMILY_VARIANTS["parallel_partial_rotary"],
    "embed_norm": FAMILY_VARIANTS["embed_norm_alibi"],
    # per-head QK-norm and a window on one layer; NoPE layers; one norm for both sublayers and a QK LayerNorm
    **{name: FAMILY_VARIANTS[name] for name in ("qwen3_like", "smollm3_like", "phi12_like")},
    # a QK-norm across all heads: OLMo 2's (post-norms only) and OLMoE's (experts)
    **{name: FAMILY_VARIANTS[name] for name in ("olmo2_like", "olmoe_like")},
    # a MoE with a dense layer and a gated shared expert; Granite's residual and logit multipliers
    **{name: FAMILY_VARIANTS[name] for name in ("qwen_moe_like", "granite_moe_like")},
    # gpt-oss: attention sinks (the runner's softmax must keep them), clamped-SwiGLU experts
    "gpt_oss_like": FAMILY_VARIANTS["gpt_oss_like"],
}
