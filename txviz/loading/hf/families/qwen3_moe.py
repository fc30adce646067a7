"""Qwen3-MoE (Qwen Team 2025): Qwen3's attention (QK-norm, an RMSNorm over each head's q and k before
RoPE; biases on all four projections with ``attention_bias``) and a MoE FFN of ``num_experts`` experts
``moe_intermediate_size`` wide, a softmax over all of them then the top ``num_experts_per_tok``
(renormalised with ``norm_topk_prob``); no shared expert. ``decoder_sparse_step`` and
``mlp_only_layers`` keep some layers dense, as in Qwen2-MoE. The weights are named as Qwen2-MoE's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.hf.families import experts

ARCHITECTURE = "Qwen3MoeForCausalLM"
# Qwen3MoeConfig's defaults for the keys a config may leave out
DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 32768,
            "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "use_sliding_window": False,
            "decoder_sparse_step": 1, "moe_intermediate_size": 768, "num_experts_per_tok": 8, "norm_topk_prob": False,
            "mlp_only_layers": None}


def qwen3_moe_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**DEFAULTS, **raw}
    experts.no_sliding_window(raw)
    fields = hf.llama_fields({**raw, "mlp_bias": False})
    n_experts = experts.n_experts(hf, raw, default=128)
    return {**fields, "qk_norm": True, **experts.routing(hf, raw, n_experts),
            "expert_hidden": hf.count(raw, "moe_intermediate_size"),
            "dense_layers": experts.dense_layers(hf, raw, fields["n_layers"])}


QK_NORM_NAMES = {  # beside Llama's names and Qwen2-MoE's expert names
    "model.layers.{i}.self_attn.q_norm.weight": "layers.{i}.attn.q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight": "layers.{i}.attn.k_norm.weight",
}
