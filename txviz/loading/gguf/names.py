"""Where each tensor of a GGUF file goes in txviz's Decoder: llama.cpp's names (gguf-py's
``tensor_mapping.py``: ``token_embd``, ``blk.{i}.attn_q`` …) → txviz's parameter names.

One table every architecture shares, plus what its ``GGUFFamily`` adds (extra per-layer names, fused
tensors split by rows). Stacked expert tensors (E, out, in) are one per expert in txviz.
"""

from __future__ import annotations

import re

from txviz.config import ModelConfig
from txviz.loading.gguf.family import GGUFFamily

GLOBAL_NAMES = {
    "token_embd.weight": "embed.weight",
    "output_norm.weight": "final_norm.weight",
    "output.weight": "lm_head.weight",
}
LAYER_NAMES = {  # blk.{i}.<key> → layers.{i}.<value>
    "attn_norm.weight": "attn_norm.weight",
    "attn_q.weight": "attn.q_proj.weight",
    "attn_k.weight": "attn.k_proj.weight",
    "attn_v.weight": "attn.v_proj.weight",
    "attn_q.bias": "attn.q_proj.bias",
    "attn_k.bias": "attn.k_proj.bias",
    "attn_v.bias": "attn.v_proj.bias",
    "attn_q_norm.weight": "attn.q_norm.weight",
    "attn_k_norm.weight": "attn.k_norm.weight",
    "attn_output.weight": "attn.o_proj.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "ffn.gate_proj.weight",
    "ffn_up.weight": "ffn.up_proj.weight",
    "ffn_down.weight": "ffn.down_proj.weight",
    "ffn_gate_inp.weight": "ffn.router.weight",
}
EXPERT_NAMES = {  # blk.{i}.<key> of shape (E, out, in) → layers.{i}.ffn.experts.{e}.<value>
    "ffn_gate_exps.weight": "gate_proj.weight",
    "ffn_up_exps.weight": "up_proj.weight",
    "ffn_down_exps.weight": "down_proj.weight",
}
CONFIG_TENSORS = ("rope_freqs.weight",)  # read into the config, not the weights (txviz.loading.gguf.rope_freqs)
LAYER_TENSOR = re.compile(r"blk\.(\d+)\.(.+)")


def txviz_names(gguf_name: str, config: ModelConfig, family: GGUFFamily) -> dict | None:
    """Where a GGUF tensor goes: {"name": …}; {"parts": (…)} for a fused tensor, split by rows in that order;
    for stacked experts, {"expert_param": …, "layer": i}; {"config": …} for one read into the config.
    None: it has no place."""
    if gguf_name in CONFIG_TENSORS:
        return {"config": gguf_name}
    if gguf_name in GLOBAL_NAMES:
        return {"name": GLOBAL_NAMES[gguf_name]}
    match = LAYER_TENSOR.fullmatch(gguf_name)
    if not match or int(match[1]) >= config.n_layers:
        return None
    layer, key = int(match[1]), match[2]
    if key in family.fused:
        return {"parts": tuple(f"layers.{layer}.{part}" for part in family.fused[key])}
    names = {**LAYER_NAMES, **family.layer_names}
    if key in names:
        return {"name": f"layers.{layer}.{names[key]}"}
    if key in EXPERT_NAMES:
        return {"expert_param": EXPERT_NAMES[key], "layer": layer}
    return None
