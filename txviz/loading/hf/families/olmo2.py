"""OLMo 2 (OLMo et al. 2024): Llama's attention and SwiGLU with the norms moved. No norm before a
sublayer; an RMSNorm on each sublayer's output before it joins the residual,
h = x + RMSNorm(Attention(x)), y = h + RMSNorm(FFN(h)); and QK-norm over the whole q and k projections
(all heads at once, H·D and Hkv·D wide), before they are split into heads and rotated."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

ARCHITECTURE = "Olmo2ForCausalLM"
# Olmo2Config's defaults (over Llama's) for the keys a config may leave out
DEFAULTS = {"rms_norm_eps": 1e-5, "max_position_embeddings": 2048}


def olmo2_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**hf.llama_defaults, **DEFAULTS, **raw}
    fields = hf.llama_fields({**raw, "mlp_bias": False})  # OLMo 2's MLP has no biases
    return {**fields, "pre_norm": False, "sandwich_norm": True, "qk_norm": True, "qk_norm_scope": "all_heads"}
