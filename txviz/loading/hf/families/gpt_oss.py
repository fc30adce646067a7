"""gpt-oss (OpenAI 2025, GptOssForCausalLM): what it adds to Llama's attention and a Mixtral-like MoE.

* attention sinks: one learned logit per head in each softmax's denominator (txviz.model.sinks);
* layers alternating a sliding window (128 tokens) and full attention (``layer_types``; by default
  even layers slide), one RoPE for both, YaRN-scaled with ``truncate`` false;
* biases on q, k, v and the output projection;
* a MoE whose router has a bias and picks the top-k logits, then takes a softmax over those k
  (txviz.model.router's ``topk_softmax``); experts with biases and a clamped SwiGLU,
  (clamp(up, ±limit) + 1) · g·σ(α·g) with g = min(gate, limit) (txviz.model.clamped_swiglu).

Its checkpoints keep each layer's experts in two 3-D tensors, ``mlp.experts.gate_up_proj`` (E, d, 2F)
whose columns alternate gate and up, and ``mlp.experts.down_proj`` (E, F, d), both multiplied from the
right (x·W), with ``_bias`` tensors beside them; ``unfuse_experts`` splits them into txviz's per-expert
linear layers. OpenAI's published weights store the experts in MXFP4 (txviz.loading.hf.families.mxfp4).
The reader is handed txviz.loading.hf.config's helpers as ``hf`` (txviz.loading.hf.families).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from txviz.loading.errors import ModelLoadError

ARCHITECTURE = "GptOssForCausalLM"
# GptOssConfig's defaults for the keys a config may leave out (its rope default is YaRN over 4096 tokens)
DEFAULTS = {"rms_norm_eps": 1e-5, "rope_theta": 150000.0, "max_position_embeddings": 131072,
            "tie_word_embeddings": False, "attention_bias": True, "mlp_bias": False, "hidden_act": "silu",
            "head_dim": 64, "num_local_experts": 128, "num_experts_per_tok": 4, "sliding_window": 128,
            "swiglu_alpha": 1.702, "swiglu_limit": 7.0,
            "rope_parameters": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                "truncate": False, "original_max_position_embeddings": 4096}}


def layer_types(raw: dict, n_layers: int, hf: SimpleNamespace) -> tuple[str, ...]:
    """``layer_types`` as written, else transformers' default: layer i slides when i is even."""
    types = raw.get("layer_types")
    if types is None:
        hf.bounded_layers(n_layers)  # before a tuple of that many entries is built
        return tuple("sliding" if i % 2 == 0 else "full" for i in range(n_layers))
    if not isinstance(types, list) or any(t not in hf.layer_type_names for t in types):
        raise ModelLoadError(f"config.json: layer_types must list {sorted(hf.layer_type_names)}, "
                             f"got {str(types)[:120]}")
    return tuple(hf.layer_type_names[t] for t in types)


def gpt_oss_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    """Llama's fields (biases on every attention projection), then gpt-oss's own."""
    raw = {**DEFAULTS, **raw}
    fields = hf.llama_fields(raw)
    kinds = layer_types(raw, fields["n_layers"], hf)
    window = hf.count(raw, "sliding_window") if "sliding" in kinds else None
    return {**fields, "attn_sinks": True, "layer_types": kinds if window else None, "sliding_window": window,
            "n_experts": hf.count(raw, "num_local_experts"), "top_k": hf.count(raw, "num_experts_per_tok"),
            "router_order": "topk_softmax", "router_bias": True, "ffn": "swiglu_clamped", "mlp_bias": True,
            "swiglu_alpha": hf.positive(raw, "swiglu_alpha"), "swiglu_limit": hf.positive(raw, "swiglu_limit")}


# ---- weights ----------------------------------------------------------------------------------------
def _expert_tensors(name: str, tensor: torch.Tensor, config) -> dict[str, torch.Tensor]:
    """One fused expert tensor as per-expert nn.Linear weights (out, in) and biases."""
    prefix, _, leaf = name.rpartition(".mlp.experts.")
    d, f, e = config.d_model, config.ffn_hidden, config.n_experts
    expected = {"gate_up_proj": (e, d, 2 * f), "gate_up_proj_bias": (e, 2 * f), "down_proj": (e, f, d),
                "down_proj_bias": (e, d)}
    if leaf not in expected:
        return {name: tensor}
    if tuple(tensor.shape) != expected[leaf]:
        raise ModelLoadError(f"{name}: shape {tuple(tensor.shape)} does not match config.json's {expected[leaf]}")
    out = {}
    for index, expert in enumerate(tensor.unbind(0)):
        at = f"{prefix}.mlp.experts.{index}"
        if leaf == "gate_up_proj":  # (d, 2F): columns alternate gate, up
            out[f"{at}.gate_proj.weight"], out[f"{at}.up_proj.weight"] = expert[:, ::2].t(), expert[:, 1::2].t()
        elif leaf == "gate_up_proj_bias":
            out[f"{at}.gate_proj.bias"], out[f"{at}.up_proj.bias"] = expert[::2], expert[1::2]
        elif leaf == "down_proj":  # (F, d)
            out[f"{at}.down_proj.weight"] = expert.t()
        else:
            out[f"{at}.down_proj.bias"] = expert
    return out


def unfuse_experts(tensors: dict, config) -> dict:
    """Every layer's fused expert tensors split into per-expert gate, up and down layers."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        out.update(_expert_tensors(name, tensor, config) if ".mlp.experts." in name else {name: tensor})
    return out
