"""Granite-MoE (IBM 2024, Granite 3.0's 1B-A400M and 3B-A800M): Llama's attention and a MoE FFN of
``num_local_experts`` experts ``intermediate_size`` wide whose router keeps the top
``num_experts_per_tok`` logits and takes a softmax over those; and µP-style fixed multipliers: the
embeddings times ``embedding_multiplier``, the attention scores times ``attention_multiplier`` (in place
of 1/√d), each sublayer's output times ``residual_multiplier`` before it joins the residual, and the
logits divided by ``logits_scaling``.

Published checkpoints store each layer's experts stacked, ``block_sparse_moe.input_linear.weight``
(E, 2F, d) and ``output_linear.weight`` (E, d, F), and the router as ``router.layer.weight``;
transformers 5 names them ``experts.gate_up_proj``, ``experts.down_proj`` and ``router.weight``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

ARCHITECTURE = "GraniteMoeForCausalLM"
# GraniteMoeConfig's defaults for the keys a config may leave out
DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 2048,
            "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False,
            "embedding_multiplier": 1.0, "logits_scaling": 1.0, "residual_multiplier": 1.0,
            "attention_multiplier": 1.0, "num_local_experts": 8, "num_experts_per_tok": 2}


def granitemoe_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**DEFAULTS, **raw}
    fields = hf.llama_fields({**raw, "mlp_bias": False})
    n_experts = hf.count(raw, "num_local_experts")
    top_k = hf.count(raw, "num_experts_per_tok")
    return {**fields, "n_experts": n_experts, "top_k": top_k,
            "router_order": "topk_softmax", "router_norm": "topk",
            "embed_scale": hf.positive(raw, "embedding_multiplier"),
            "query_scale": hf.positive(raw, "attention_multiplier"),
            "residual_scale": hf.positive(raw, "residual_multiplier"),
            "logit_divisor": hf.positive(raw, "logits_scaling")}


EXPERT_NAMES = {  # after expert_weights.split_stacked_experts
    "model.layers.{i}.block_sparse_moe.router.layer.weight": "layers.{i}.ffn.router.weight",
    "model.layers.{i}.block_sparse_moe.router.weight": "layers.{i}.ffn.router.weight",
    **{f"model.layers.{{i}}.block_sparse_moe.experts.{{e}}.{part}.weight":
       f"layers.{{i}}.ffn.experts.{{e}}.{part}.weight" for part in ("gate_proj", "up_proj", "down_proj")},
}
