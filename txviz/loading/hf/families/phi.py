"""Phi-1, Phi-1.5 and Phi-2 (Microsoft 2023): GPT-J's parallel block with ONE LayerNorm read by both
sublayers, y = x + Attention(LN(x)) + MLP(LN(x)); RoPE on part of each head (``partial_rotary_factor``,
0.5 unless the config says: Phi-2 writes 0.4); biases on every projection and on the unembedding; a
gelu_new (tanh) MLP; with ``qk_layernorm``, a LayerNorm over each head's q and k before RoPE."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.errors import ModelLoadError

ARCHITECTURE = "PhiForCausalLM"
# PhiConfig's defaults for the keys a config may leave out
DEFAULTS = {"hidden_act": "gelu_new", "max_position_embeddings": 2048, "layer_norm_eps": 1e-5,
            "tie_word_embeddings": False, "qk_layernorm": False, "rope_theta": 10000.0, "partial_rotary_factor": 0.5}


def phi_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**DEFAULTS, **raw}
    if raw["hidden_act"] not in hf.gelu_forms:
        raise ModelLoadError(f"config.json: hidden_act {raw['hidden_act']!r} is not supported; "
                             f"supported: {sorted(hf.gelu_forms)}")
    if hf.flag(raw, "tie_word_embeddings"):
        raise ModelLoadError("config.json: a Phi with tied embeddings (whose lm_head keeps its own bias) is "
                             "not supported")
    max_len = hf.count(raw, "max_position_embeddings")
    theta, scaling = hf.read_rope(raw, max_len, partial_ok=True)
    d_model, n_heads = hf.count(raw, "hidden_size"), hf.count(raw, "num_attention_heads")
    return dict(vocab_size=hf.count(raw, "vocab_size"), d_model=d_model, n_layers=hf.count(raw, "num_hidden_layers"),
                n_heads=n_heads,
                n_kv_heads=hf.count(raw, "num_key_value_heads") if raw.get("num_key_value_heads") else n_heads,
                ffn_hidden=hf.count(raw, "intermediate_size"), norm="layernorm",
                norm_eps=hf.positive(raw, "layer_norm_eps"), ffn="gelu_mlp",
                gelu_approximate=hf.gelu_forms[raw["hidden_act"]], positions="rope", rope_theta=theta,
                rope_scaling=scaling, rotary_dims=hf.rotary_dims(raw, d_model // n_heads), max_seq_len=max_len,
                parallel_block=True, shared_block_norm=True, qk_norm=hf.flag(raw, "qk_layernorm"),
                qkv_bias=True, out_bias=True, mlp_bias=True, lm_head_bias=True, tie_embeddings=False)
