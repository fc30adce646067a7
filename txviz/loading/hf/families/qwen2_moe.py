"""Qwen1.5-MoE / Qwen2-MoE (Qwen Team 2024): Qwen2's attention (biases on q, k and v) with a MoE FFN of
``num_experts`` experts ``moe_intermediate_size`` wide, a softmax over all of them then the top
``num_experts_per_tok`` (renormalised with ``norm_topk_prob``), and a shared expert
``shared_expert_intermediate_size`` wide that every token runs through, scaled by σ(x·w); layers outside
``decoder_sparse_step`` or in ``mlp_only_layers`` keep a dense FFN ``intermediate_size`` wide."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.hf.families import experts

ARCHITECTURE = "Qwen2MoeForCausalLM"
# Qwen2MoeConfig's defaults for the keys a config may leave out
DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 32768,
            "tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
            "decoder_sparse_step": 1, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
            "num_experts_per_tok": 4, "num_experts": 60, "norm_topk_prob": False, "mlp_only_layers": None,
            "qkv_bias": True}


def qwen2_moe_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**DEFAULTS, **raw}
    experts.no_sliding_window(raw)
    fields = hf.llama_fields({**raw, "attention_bias": False, "mlp_bias": False})
    n_experts = hf.count(raw, "num_experts", 0)
    if not n_experts:  # transformers then builds every layer dense
        return fields
    shared = hf.count(raw, "shared_expert_intermediate_size")
    return {**fields, "qkv_bias": hf.flag(raw, "qkv_bias"), **experts.routing(hf, raw, n_experts),
            "expert_hidden": hf.count(raw, "moe_intermediate_size"), "shared_expert_hidden": shared,
            "shared_expert_gate": True, "dense_layers": experts.dense_layers(hf, raw, fields["n_layers"])}


# Published and save_pretrained names of a MoE layer's FFN (a dense layer's are Llama's ``mlp.*_proj``);
# transformers 5's stacked experts are split first (expert_weights.split_stacked_experts).
EXPERT_NAMES = {
    "model.layers.{i}.mlp.gate.weight": "layers.{i}.ffn.router.weight",
    **{f"model.layers.{{i}}.mlp.experts.{{e}}.{part}.weight": f"layers.{{i}}.ffn.experts.{{e}}.{part}.weight"
       for part in ("gate_proj", "up_proj", "down_proj")},
}
SHARED_EXPERT_NAMES = {
    **{f"model.layers.{{i}}.mlp.shared_expert.{part}.weight": f"layers.{{i}}.ffn.shared_expert.{part}.weight"
       for part in ("gate_proj", "up_proj", "down_proj")},
    "model.layers.{i}.mlp.shared_expert_gate.weight": "layers.{i}.ffn.shared_expert_gate.weight",
}
