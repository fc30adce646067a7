"""OLMoE (Muennighoff et al. 2024): OLMo's attention, with QK-norm over the whole q and k projections
(all heads at once, H·D and Hkv·D wide, before they are split into heads and rotated), pre-norm blocks,
and a MoE FFN on every layer: ``num_experts`` experts ``intermediate_size`` wide, a softmax over all of
them then the top ``num_experts_per_tok``, the chosen probabilities kept as they are unless
``norm_topk_prob`` (false in the published OLMoE-1B-7B). ``clip_qkv`` (clamping q, k and v) is refused.
The weights are named as Qwen2-MoE's, with Qwen3-MoE's q_norm and k_norm."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.families import experts

ARCHITECTURE = "OlmoeForCausalLM"
# OlmoeConfig's defaults for the keys a config may leave out
DEFAULTS = {"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 4096,
            "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "clip_qkv": None,
            "num_experts_per_tok": 8, "norm_topk_prob": False}


def olmoe_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**DEFAULTS, **raw}
    if raw["clip_qkv"] is not None:
        raise ModelLoadError("config.json: clip_qkv (q, k and v clamped) is not supported")
    fields = hf.llama_fields({**raw, "mlp_bias": False})
    width = hf.count(raw, "hidden_size") // hf.count(raw, "num_attention_heads")
    if fields["head_dim"] not in (None, width):  # its q_norm is hidden_size wide whatever head_dim says
        raise ModelLoadError(f"config.json: head_dim={fields['head_dim']} differs from hidden_size/num_attention_heads "
                             f"= {width}, which OLMoE's QK-norm assumes")
    n_experts = experts.n_experts(hf, raw, default=64)
    return {**fields, "qk_norm": True, "qk_norm_scope": "all_heads", **experts.routing(hf, raw, n_experts)}
