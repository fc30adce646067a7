"""Qwen1.5-MoE / Qwen2-MoE in GGUF: llama.cpp's arch ``qwen2moe`` (``convert_hf_to_gguf.py``: ``Qwen2MoeModel``).

Qwen2's attention (q/k/v biases, NEOX RoPE: nothing un-permuted) with routed experts stacked (E, out, in)
``expert_feed_forward_length`` wide, and a shared expert every token runs through,
``expert_shared_feed_forward_length`` wide (``ffn_{gate,up,down}_shexp``), scaled per token by σ(x·w)
with ``ffn_gate_inp_shexp`` (stored as a vector of d_model values: the (1, d) row of the checkpoint).
The router is a softmax over every expert, the top k kept without renormalising (llama.cpp's
``qwen2moe.cpp`` builds its MoE with weight normalization off; transformers' ``norm_topk_prob`` False):
``router_norm="all"``. llama.cpp runs every layer as MoE (no dense layers in this architecture).
"""

from __future__ import annotations

from typing import Any, Mapping

from txviz.loading.gguf.family import ArchKeys, GGUFFamily

SHARED_EXPERT_NAMES = {  # blk.{i}.<key> → layers.{i}.<value>
    "ffn_gate_shexp.weight": "ffn.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "ffn.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "ffn.shared_expert.down_proj.weight",
    "ffn_gate_inp_shexp.weight": "ffn.shared_expert_gate.weight",
}


def qwen2moe_fields(keys: ArchKeys, common: Mapping[str, Any]) -> dict[str, Any]:
    shared = keys.number("expert_shared_feed_forward_length", int, 0)
    return {"router_norm": "all", "ffn_hidden": keys.number("feed_forward_length", int, common["ffn_hidden"]),
            "expert_hidden": keys.number("expert_feed_forward_length", int, common["ffn_hidden"]),
            "shared_expert_hidden": shared,
            "shared_expert_gate": bool(shared) and keys.has_tensor("blk.0.ffn_gate_inp_shexp.weight")}


QWEN2MOE = GGUFFamily("qwen2moe", layer_names=SHARED_EXPERT_NAMES, fields=qwen2moe_fields)
