"""Hugging Face ``config.json`` → ModelConfig, one small reader per supported family.

A family is picked by ``model_type`` (what transformers' Auto classes use) and checked against
``architectures``; anything else is refused with the list of what is supported. Each reader is a few
lines of field names, with the transformers class defaults for fields a config may leave out, so
the numbers a reader sees are exactly those transformers would build the reference model from.

RoPE parameters come in two spellings: transformers 4.x writes ``rope_theta`` plus a ``rope_scaling``
dict keyed ``type``/``rope_type``; transformers 5 writes one ``rope_parameters`` dict that holds
``rope_theta`` too. Both are read the way ``PreTrainedConfig.convert_rope_params_to_dict`` reads them.
Only the config is read here: no weights, so published configs of 70B models are fine for the memory
calculators; malformed, oversized or absurd input raises ModelLoadError naming the field.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from txviz.config import ConfigError, ModelConfig, RopeScaling, check_bound
from txviz.limits import Limits
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.families import granitemoe, olmo2, olmoe, phi, qwen2_moe, qwen3, qwen3_moe, smollm3
from txviz.loading.hf.families import gemma3_multimodal, gpt_oss, mxfp4

MAX_COUNT = (1 << 31) - 1  # no dimension, layer count or vocabulary is anywhere near this

# model_type → the causal-LM class of that family (what ``architectures[0]`` must say, if given)
SUPPORTED = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "gpt2": "GPT2LMHeadModel",
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "bloom": "BloomForCausalLM",
    "mpt": "MptForCausalLM",
    "gpt_neox": "GPTNeoXForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gemma3": gemma3_multimodal.ARCHITECTURE,  # its text decoder only
    "gpt_oss": gpt_oss.ARCHITECTURE,
}


# ---- reading and checking fields ----------------------------------------------------------------
def _count(raw: dict, key: str, minimum: int = 1) -> int:
    value = raw.get(key)
    if value is None:
        raise ModelLoadError(f"config.json has no {key!r}, which a {raw.get('model_type', 'model')} config needs")
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_COUNT:
        raise ModelLoadError(f"config.json: {key} must be an integer from {minimum} to 2^31, got {value!r}")
    return value


def _positive(raw: dict, key: str, default: float | None = None) -> float:
    value = raw.get(key) if raw.get(key) is not None else default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ModelLoadError(f"config.json: {key} must be a positive finite number, got {value!r}")
    return float(value)


def _flag(raw: dict, key: str) -> bool:
    value = raw.get(key)
    if not isinstance(value, bool):
        raise ModelLoadError(f"config.json: {key} must be true or false, got {value!r}")
    return value


def _with_defaults(raw: dict, defaults: dict) -> dict:
    """The config as transformers would see it: the class defaults under what the file says (an
    explicit null stays null: ``"sliding_window": null`` means no window)."""
    return {**defaults, **raw}


# ---- RoPE -----------------------------------------------------------------------------------------
def _no_scaling(params: dict, max_len: int) -> RopeScaling:
    return RopeScaling()


def _dynamic_ntk(params: dict, max_len: int) -> RopeScaling:
    """transformers' dynamic NTK only changes the base once a sequence outgrows
    max_position_embeddings; txviz never runs past that (it is ``max_seq_len``), so within the
    context it is plain RoPE, exactly."""
    return RopeScaling()


def _linear(params: dict, max_len: int) -> RopeScaling:
    return RopeScaling("linear", factor=_positive(params, "factor"))


def _original_length(params: dict, max_len: int) -> int:
    """The pretraining context the scaling stretches (transformers: max_position_embeddings if unset)."""
    has_it = params.get("original_max_position_embeddings") is not None
    return _count(params, "original_max_position_embeddings") if has_it else max_len


def _llama3(params: dict, max_len: int) -> RopeScaling:
    return RopeScaling("llama3", factor=_positive(params, "factor"),
                       original_max_seq_len=_original_length(params, max_len),
                       low_freq_factor=_positive(params, "low_freq_factor"),
                       high_freq_factor=_positive(params, "high_freq_factor"))


def _yarn(params: dict, max_len: int) -> RopeScaling:
    original = _original_length(params, max_len)
    factor = _positive(params, "factor", max_len / original)
    if params.get("mscale") and params.get("mscale_all_dim"):
        raise ModelLoadError("yarn rope with mscale/mscale_all_dim (DeepSeek style) is not supported")
    scaling = RopeScaling("yarn", factor=factor, original_max_seq_len=original,
                          beta_fast=_positive(params, "beta_fast", 32.0),
                          beta_slow=_positive(params, "beta_slow", 1.0),
                          truncate=_flag({"truncate": params.get("truncate", True)}, "truncate"))
    default_attention = 0.1 * math.log(scaling.factor) + 1.0 if scaling.factor > 1 else 1.0
    given = _positive(params, "attention_factor", default_attention)
    if not math.isclose(given, default_attention, rel_tol=1e-6):
        raise ModelLoadError(f"yarn rope with attention_factor={given} (not the paper's "
                             f"{default_attention:.6f}) is not supported")
    return scaling


ROPE_TYPES: dict[str, Callable[[dict, int], RopeScaling]] = {
    "default": _no_scaling, "dynamic": _dynamic_ntk, "linear": _linear, "llama3": _llama3, "yarn": _yarn,
}


def partial_rotary_factor(raw: dict) -> float:
    """The share of each head RoPE rotates: ``partial_rotary_factor`` in the rope parameters or at the
    top level (GPT-NeoX's ``rotary_pct`` is read by its own reader), 1 if unset."""
    params = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    given = params.get("partial_rotary_factor") if isinstance(params, dict) else None
    if given is None:
        given = raw.get("partial_rotary_factor", 1.0)
    value = _positive({"partial_rotary_factor": given}, "partial_rotary_factor")
    if value > 1:
        raise ModelLoadError(f"config.json: partial_rotary_factor must be at most 1, got {value}")
    return value


def rotary_dims(raw: dict, head_dim: int) -> int | None:
    """RoPE's dimensions per head as transformers computes them (int(head_dim·factor)); None for all."""
    dims = int(head_dim * partial_rotary_factor(raw))
    return None if dims == head_dim else dims


def read_rope(raw: dict, max_len: int, partial_ok: bool = False) -> tuple[float, RopeScaling]:
    """(rope_theta, RopeScaling) from either spelling; ``raw`` already carries the class defaults. A
    partial rotary factor is refused unless the caller reads it (``partial_ok``, see rotary_dims)."""
    params = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    if not isinstance(params, dict):
        raise ModelLoadError(f"config.json: rope parameters must be an object, got {params!r}")
    params = {**params, "rope_theta": params.get("rope_theta", raw.get("rope_theta"))}
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise ModelLoadError(f"config.json: rope type {kind!r} is not supported; "
                             f"supported: {sorted(ROPE_TYPES)}")
    if not partial_ok and params.get("partial_rotary_factor", raw.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ModelLoadError("config.json: partial_rotary_factor != 1 (RoPE on part of each head) is not supported")
    return _positive(params, "rope_theta"), ROPE_TYPES[kind](params, max_len)


# ---- one reader per family ----------------------------------------------------------------------
LLAMA_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 2048,
                  "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                  "hidden_act": "silu"}
MISTRAL_DEFAULTS = {**LLAMA_DEFAULTS, "num_key_value_heads": 8, "max_position_embeddings": 4096 * 32,
                    "sliding_window": 4096}
MIXTRAL_DEFAULTS = {**MISTRAL_DEFAULTS, "rms_norm_eps": 1e-5, "rope_theta": 1e6, "sliding_window": None,
                    "num_local_experts": 8, "num_experts_per_tok": 2}
QWEN2_DEFAULTS = {**LLAMA_DEFAULTS, "max_position_embeddings": 32768, "use_sliding_window": False,
                  "sliding_window": 4096, "max_window_layers": 28}
GPT2_DEFAULTS = {"n_positions": 1024, "n_inner": None, "layer_norm_epsilon": 1e-5,
                 "activation_function": "gelu_new", "tie_word_embeddings": True,
                 "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False}
GELU_FORMS = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "none"}


def _llama_fields(raw: dict, partial_ok: bool = False) -> dict[str, Any]:
    """Llama and the families built on it: RMSNorm, SwiGLU, RoPE, optional biases and head_dim (a
    partial rotary factor refused unless the caller reads it: ``partial_ok``)."""
    if raw["hidden_act"] not in ("silu", "swish"):
        raise ModelLoadError(f"config.json: hidden_act {raw['hidden_act']!r} is not supported; the "
                             "SwiGLU FFN uses silu")
    max_len = _count(raw, "max_position_embeddings")
    theta, scaling = read_rope(raw, max_len, partial_ok)
    n_heads = _count(raw, "num_attention_heads")
    bias = _flag(raw, "attention_bias")
    return dict(vocab_size=_count(raw, "vocab_size"), d_model=_count(raw, "hidden_size"),
                n_layers=_count(raw, "num_hidden_layers"), n_heads=n_heads,
                n_kv_heads=_count(raw, "num_key_value_heads") if raw.get("num_key_value_heads") else n_heads,
                head_dim=_count(raw, "head_dim") if raw.get("head_dim") else None,
                ffn_hidden=_count(raw, "intermediate_size"), norm="rmsnorm",
                norm_eps=_positive(raw, "rms_norm_eps"), ffn="swiglu", positions="rope", rope_theta=theta,
                rope_scaling=scaling, max_seq_len=max_len, tie_embeddings=_flag(raw, "tie_word_embeddings"),
                qkv_bias=bias, out_bias=bias, mlp_bias=_flag(raw, "mlp_bias"))


def llama_config(raw: dict) -> dict[str, Any]:
    return _llama_fields(_with_defaults(raw, LLAMA_DEFAULTS))


def mistral_config(raw: dict) -> dict[str, Any]:
    """Llama without biases, plus one sliding window for every layer (Jiang et al. 2023)."""
    raw = _with_defaults(raw, MISTRAL_DEFAULTS)
    window = _count(raw, "sliding_window") if raw.get("sliding_window") is not None else None
    return {**_llama_fields({**raw, "attention_bias": False, "mlp_bias": False}), "sliding_window": window}


def mixtral_config(raw: dict) -> dict[str, Any]:
    """Mistral with a top-k routed MoE FFN whose chosen gates are renormalized (Jiang et al. 2024)."""
    raw = _with_defaults(raw, MIXTRAL_DEFAULTS)
    return {**mistral_config(raw), "n_experts": _count(raw, "num_local_experts"),
            "top_k": _count(raw, "num_experts_per_tok"), "router_norm": "topk"}


def _bounded_layers(n_layers: int) -> None:
    try:
        check_bound("n_layers", n_layers)
    except ConfigError as error:
        raise ModelLoadError(f"config.json: {error}") from None


def _qwen2_window(raw: dict, n_layers: int) -> int | None:
    """Qwen2 slides only layers ``>= max_window_layers`` and only with ``use_sliding_window``;
    transformers 5 writes the outcome as ``layer_types``. txviz has one window for all layers."""
    window = raw.get("sliding_window") if _flag(raw, "use_sliding_window") else None
    _bounded_layers(n_layers)  # before a list of that many entries is built
    types = raw.get("layer_types") or [
        "sliding_attention" if window is not None and i >= _count(raw, "max_window_layers", 0) else "full_attention"
        for i in range(n_layers)]
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise ModelLoadError(f"config.json: layer_types must be a list of names, got {types!r}")
    if set(types) == {"full_attention"}:
        return None
    if set(types) == {"sliding_attention"} and window is not None:
        return _count(raw, "sliding_window")
    raise ModelLoadError(f"config.json: layer types {sorted(set(types))} with sliding_window={window}: "
                         "a sliding window on only some layers is not supported")


def qwen2_config(raw: dict) -> dict[str, Any]:
    """Llama with biases on q, k and v (not on the output projection)."""
    raw = _with_defaults(raw, QWEN2_DEFAULTS)
    fields = _llama_fields({**raw, "attention_bias": False, "mlp_bias": False})
    return {**fields, "qkv_bias": True, "sliding_window": _qwen2_window(raw, fields["n_layers"])}


def gpt2_config(raw: dict) -> dict[str, Any]:
    """GPT-2 (Radford et al. 2019): LayerNorm, GELU MLP, learned positions, biases everywhere."""
    raw = _with_defaults(raw, GPT2_DEFAULTS)
    if raw["activation_function"] not in GELU_FORMS:
        raise ModelLoadError(f"config.json: activation_function {raw['activation_function']!r} is not "
                             f"supported; supported: {sorted(GELU_FORMS)}")
    if not _flag(raw, "scale_attn_weights") or _flag(raw, "scale_attn_by_inverse_layer_idx"):
        raise ModelLoadError("config.json: GPT-2 attention scaled other than by 1/sqrt(head_dim) is not supported")
    d_model = _count(raw, "n_embd")
    return dict(vocab_size=_count(raw, "vocab_size"), d_model=d_model, n_layers=_count(raw, "n_layer"),
                n_heads=_count(raw, "n_head"),
                ffn_hidden=_count(raw, "n_inner") if raw["n_inner"] is not None else 4 * d_model,
                norm="layernorm", norm_eps=_positive(raw, "layer_norm_epsilon"), ffn="gelu_mlp",
                gelu_approximate=GELU_FORMS[raw["activation_function"]], positions="learned",
                max_seq_len=_count(raw, "n_positions"), tie_embeddings=_flag(raw, "tie_word_embeddings"),
                qkv_bias=True, out_bias=True, mlp_bias=True)


# Gemma (Team Gemma 2024): GeGLU, embeddings scaled by √d, the (1 + w) RMSNorm (folded into the weights
# by hf_names.fold_gemma_norms), tied embeddings. Gemma 2 adds post-norms, alternating sliding/full
# layers, query_pre_attn_scalar and soft-caps; Gemma 3 QK-norm, a 5:1 pattern and a local RoPE base.
GEMMA_DEFAULTS = {"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 8192,
                  "tie_word_embeddings": True, "attention_bias": False, "head_dim": 256,
                  "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh"}
GEMMA2_DEFAULTS = {**GEMMA_DEFAULTS, "query_pre_attn_scalar": 256, "sliding_window": 4096,
                   "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0}
GEMMA3_DEFAULTS = {**GEMMA2_DEFAULTS, "max_position_embeddings": 131072, "rope_theta": 1e6,
                   "rope_local_base_freq": 10000.0, "final_logit_softcapping": None,
                   "attn_logit_softcapping": None, "sliding_window_pattern": 6, "use_bidirectional_attention": False}
LAYER_TYPE_NAMES = {"full_attention": "full", "sliding_attention": "sliding"}


def _gemma_fields(raw: dict, activation: str) -> dict[str, Any]:
    """What every Gemma shares; ``activation`` is the FFN's (gelu_pytorch_tanh, or exact gelu)."""
    if activation not in GELU_FORMS:
        raise ModelLoadError(f"config.json: activation {activation!r} is not supported; "
                             f"supported: {sorted(GELU_FORMS)}")
    fields = _llama_fields({**raw, "hidden_act": "silu", "mlp_bias": False})  # counts, RoPE, norms, biases
    return {**fields, "ffn": "geglu", "gelu_approximate": GELU_FORMS[activation],
            "embed_scale": float(fields["d_model"]) ** 0.5}  # transformers: hidden_size**0.5


def _gemma_optional(raw: dict, key: str) -> float | None:
    return None if raw.get(key) is None else _positive(raw, key)


def _layer_types(raw: dict, n_layers: int, sliding_every: int) -> tuple[str, ...]:
    """``layer_types`` as written, else every ``sliding_every``-th layer full (transformers' default)."""
    types = raw.get("layer_types")
    if types is None:
        _bounded_layers(n_layers)  # before a tuple of that many entries is built
        return tuple("full" if (i + 1) % sliding_every == 0 else "sliding" for i in range(n_layers))
    if not isinstance(types, list) or any(t not in LAYER_TYPE_NAMES for t in types):
        raise ModelLoadError(f"config.json: layer_types must list {sorted(LAYER_TYPE_NAMES)}, got {str(types)[:120]}")
    return tuple(LAYER_TYPE_NAMES[t] for t in types)


def gemma_config(raw: dict) -> dict[str, Any]:
    """Gemma 1. transformers reads a legacy ``hidden_act: "gelu"`` as the tanh form, as here."""
    raw = _with_defaults(raw, GEMMA_DEFAULTS)
    activation = "gelu_pytorch_tanh" if raw["hidden_act"] == "gelu" else raw["hidden_act"]
    return _gemma_fields(raw, activation)


def gemma2_config(raw: dict) -> dict[str, Any]:
    raw = _with_defaults(raw, GEMMA2_DEFAULTS)
    fields = _gemma_fields(raw, raw["hidden_activation"])
    return {**fields, "sandwich_norm": True, "query_scale": _positive(raw, "query_pre_attn_scalar") ** -0.5,
            "sliding_window": _gemma_window(raw), "layer_types": _layer_types(raw, fields["n_layers"], 2),
            "attn_softcap": _gemma_optional(raw, "attn_logit_softcapping"),
            "final_softcap": _gemma_optional(raw, "final_logit_softcapping")}


def _gemma_window(raw: dict) -> int | None:
    return _count(raw, "sliding_window") if raw.get("sliding_window") is not None else None


def _gemma3_rope(raw: dict, max_len: int) -> tuple[float, RopeScaling, float]:
    """(global θ, global scaling, local θ). transformers 5 writes ``rope_parameters`` keyed by layer
    type; 4.x wrote rope_theta, rope_local_base_freq and a rope_scaling that applies to global layers
    only. Local layers are never scaled."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict) and {"full_attention", "sliding_attention"} & set(params):
        full = {"rope_theta": raw["rope_theta"], **(params.get("full_attention") or {})}
        local = {"rope_theta": raw["rope_local_base_freq"], **(params.get("sliding_attention") or {})}
    else:
        full = {"rope_theta": raw["rope_theta"], **(raw.get("rope_scaling") or params or {})}
        local = {"rope_theta": raw["rope_local_base_freq"]}
    if local.get("rope_type", local.get("type", "default")) != "default":
        raise ModelLoadError("config.json: scaled RoPE on Gemma 3's sliding layers is not supported")
    theta, scaling = read_rope({"rope_parameters": full}, max_len)
    return theta, scaling, _positive(local, "rope_theta")


def gemma3_text_config(raw: dict) -> dict[str, Any]:
    """Gemma 3's text model. transformers ignores ``attn_logit_softcapping`` in Gemma 3's attention
    (only Gemma 2 passes it on), so no score cap here either."""
    raw = _with_defaults(raw, GEMMA3_DEFAULTS)
    if raw["use_bidirectional_attention"]:
        raise ModelLoadError("config.json: bidirectional attention (an encoder Gemma) is not supported")
    fields = _gemma_fields(raw, raw["hidden_activation"])
    theta, scaling, local_theta = _gemma3_rope(raw, fields["max_seq_len"])
    every = _count(raw, "sliding_window_pattern")
    return {**fields, "rope_theta": theta, "rope_scaling": scaling, "rope_local_theta": local_theta,
            "qk_norm": True, "sandwich_norm": True, "query_scale": _positive(raw, "query_pre_attn_scalar") ** -0.5,
            "sliding_window": _gemma_window(raw), "layer_types": _layer_types(raw, fields["n_layers"], every),
            "final_softcap": _gemma_optional(raw, "final_logit_softcapping")}


# ---- ALiBi and parallel-block families -----------------------------------------------------------
# BLOOM (BigScience 2022): ALiBi, a LayerNorm on the embeddings, biases everywhere, 4d GELU (tanh) MLP,
# fused per-head q/k/v. It has no position limit; txviz's context is its training ``seq_length``.
BLOOM_DEFAULTS = {"layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "seq_length": 2048,
                  "apply_residual_connection_post_layernorm": False, "pretraining_tp": 1, "slow_but_exact": False}
# MPT (MosaicML 2023): ALiBi, LayerNorm without bias, no biases at all, 4d exact-GELU MLP, fused q/k/v.
MPT_DEFAULTS = {"layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "max_seq_len": 2048, "no_bias": True,
                "expansion_ratio": 4, "logit_scale": None}
MPT_ATTN_DEFAULTS = {"attn_type": "multihead_attention", "clip_qkv": None, "softmax_scale": None,
                     "prefix_lm": False, "qk_ln": False, "alibi": True, "alibi_bias_max": 8,
                     "attn_uses_sequence_id": False}
# GPT-NeoX (Black et al. 2022): partial rotary (rotary_pct of each head), parallel attention + MLP by
# default, biases (attention_bias on q/k/v and the output), fused per-head q/k/v, untied output.
NEOX_DEFAULTS = {"layer_norm_eps": 1e-5, "max_position_embeddings": 2048, "tie_word_embeddings": False,
                 "use_parallel_residual": True, "attention_bias": True, "hidden_act": "gelu",
                 "rotary_pct": 0.25, "rotary_emb_base": 10000.0}
PHI3_DEFAULTS = {**LLAMA_DEFAULTS, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096, "sliding_window": None}


def bloom_config(raw: dict) -> dict[str, Any]:
    raw = _with_defaults(raw, BLOOM_DEFAULTS)
    if _flag(raw, "apply_residual_connection_post_layernorm"):
        raise ModelLoadError("config.json: apply_residual_connection_post_layernorm (the residual taken after "
                             "the norm) is not supported")
    if raw["pretraining_tp"] != 1 and raw["slow_but_exact"]:
        raise ModelLoadError("config.json: slow_but_exact tensor-parallel sums are not supported")
    d_model = _count(raw, "hidden_size") if raw.get("hidden_size") is not None else _count(raw, "n_embed")
    return dict(vocab_size=_count(raw, "vocab_size"), d_model=d_model, n_layers=_count(raw, "n_layer"),
                n_heads=_count(raw, "n_head"), ffn_hidden=4 * d_model, norm="layernorm",
                norm_eps=_positive(raw, "layer_norm_epsilon"), ffn="gelu_mlp", gelu_approximate="tanh",
                positions="alibi", max_seq_len=_count(raw, "seq_length"), embed_norm=True,
                tie_embeddings=_flag(raw, "tie_word_embeddings"), qkv_bias=True, out_bias=True, mlp_bias=True)


def _mpt_attention(raw: dict) -> dict:
    attn = raw.get("attn_config") or {}
    if not isinstance(attn, dict):
        raise ModelLoadError(f"config.json: attn_config must be an object, got {str(attn)[:80]!r}")
    attn = _with_defaults(attn, MPT_ATTN_DEFAULTS)
    unsupported = {"attn_type": attn["attn_type"] != "multihead_attention", "clip_qkv": bool(attn["clip_qkv"]),
                   "prefix_lm": bool(attn["prefix_lm"]), "qk_ln": bool(attn["qk_ln"]), "alibi=false": not attn["alibi"],
                   "attn_uses_sequence_id": bool(attn["attn_uses_sequence_id"])}
    named = [name for name, present in unsupported.items() if present]
    if named:
        raise ModelLoadError(f"config.json: MPT attention with {', '.join(named)} is not supported")
    return attn


def mpt_config(raw: dict) -> dict[str, Any]:
    """transformers' MPT builds its MLP 4·d wide and its ALiBi with max 8 whatever the config says; the
    expansion ratio and alibi_bias_max are read as written (the checkpoint's shapes check the first)."""
    raw = _with_defaults(raw, MPT_DEFAULTS)
    attn = _mpt_attention(raw)
    if not _flag(raw, "no_bias") or raw["logit_scale"] is not None:
        raise ModelLoadError("config.json: MPT with biases (no_bias false) or a logit_scale is not supported")
    d_model = _count(raw, "d_model")
    scale = None if attn["softmax_scale"] is None else _positive(attn, "softmax_scale")
    return dict(vocab_size=_count(raw, "vocab_size"), d_model=d_model, n_layers=_count(raw, "n_layers"),
                n_heads=_count(raw, "n_heads"), ffn_hidden=_count(raw, "expansion_ratio") * d_model,
                norm="layernorm", norm_bias=False, norm_eps=_positive(raw, "layer_norm_epsilon"), ffn="gelu_mlp",
                gelu_approximate="none", positions="alibi", alibi_bias_max=_positive(attn, "alibi_bias_max"),
                query_scale=scale, max_seq_len=_count(raw, "max_seq_len"),
                tie_embeddings=_flag(raw, "tie_word_embeddings"))


def gpt_neox_config(raw: dict) -> dict[str, Any]:
    """RoPE's share of each head is ``partial_rotary_factor`` in the rope parameters, else ``rotary_pct``
    (transformers' GPTNeoXConfig), its base ``rope_theta`` there, else ``rotary_emb_base``."""
    raw = _with_defaults(raw, NEOX_DEFAULTS)
    if raw["hidden_act"] not in GELU_FORMS:
        raise ModelLoadError(f"config.json: hidden_act {raw['hidden_act']!r} is not supported; "
                             f"supported: {sorted(GELU_FORMS)}")
    params = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    params = {"rope_theta": raw["rotary_emb_base"], "partial_rotary_factor": raw["rotary_pct"],
              **(params if isinstance(params, dict) else {"invalid": params})}
    if "invalid" in params:
        raise ModelLoadError(f"config.json: rope parameters must be an object, got {params['invalid']!r}")
    max_len = _count(raw, "max_position_embeddings")
    theta, scaling = read_rope({"rope_parameters": params}, max_len, partial_ok=True)
    d_model, n_heads = _count(raw, "hidden_size"), _count(raw, "num_attention_heads")
    bias = _flag(raw, "attention_bias")
    return dict(vocab_size=_count(raw, "vocab_size"), d_model=d_model, n_layers=_count(raw, "num_hidden_layers"),
                n_heads=n_heads, ffn_hidden=_count(raw, "intermediate_size"), norm="layernorm",
                norm_eps=_positive(raw, "layer_norm_eps"), ffn="gelu_mlp",
                gelu_approximate=GELU_FORMS[raw["hidden_act"]],
                positions="rope", rope_theta=theta, rope_scaling=scaling,
                rotary_dims=rotary_dims({"rope_parameters": params}, d_model // n_heads),
                parallel_block=_flag(raw, "use_parallel_residual"), max_seq_len=max_len,
                tie_embeddings=_flag(raw, "tie_word_embeddings"), qkv_bias=bias, out_bias=bias, mlp_bias=True)


def phi3_config(raw: dict) -> dict[str, Any]:
    """Phi-3 (Abdin et al. 2024): Llama with fused q/k/v and gate/up weights (split by the loader),
    an optional window on every layer and partial rotary (Phi-4-mini). LongRoPE is not supported."""
    raw = _with_defaults(raw, PHI3_DEFAULTS)
    fields = _llama_fields({**raw, "attention_bias": False, "mlp_bias": False}, partial_ok=True)
    head_dim = fields["head_dim"] or fields["d_model"] // fields["n_heads"]
    window = _count(raw, "sliding_window") if raw.get("sliding_window") is not None else None
    return {**fields, "rotary_dims": rotary_dims(raw, head_dim), "sliding_window": window}


CONFIG_READERS: dict[str, Callable[[dict], dict[str, Any]]] = {
    "llama": llama_config, "mistral": mistral_config, "qwen2": qwen2_config,
    "mixtral": mixtral_config, "gpt2": gpt2_config,
    "gemma": gemma_config, "gemma2": gemma2_config, "gemma3_text": gemma3_text_config,
    "bloom": bloom_config, "mpt": mpt_config, "gpt_neox": gpt_neox_config, "phi3": phi3_config,
}

# Families with modules of their own (txviz.loading.hf.families), each reader handed the helpers above
READER_HELPERS = SimpleNamespace(count=_count, positive=_positive, flag=_flag, llama_fields=_llama_fields,
                                 llama_defaults=LLAMA_DEFAULTS, read_rope=read_rope, rotary_dims=rotary_dims,
                                 gelu_forms=GELU_FORMS, layer_type_names=LAYER_TYPE_NAMES,
                                 bounded_layers=_bounded_layers)
DENSE_FAMILIES = {"qwen3": (qwen3.ARCHITECTURE, qwen3.qwen3_config), "olmo2": (olmo2.ARCHITECTURE, olmo2.olmo2_config),
                  "smollm3": (smollm3.ARCHITECTURE, smollm3.smollm3_config), "phi": (phi.ARCHITECTURE, phi.phi_config)}
SUPPORTED.update({kind: architecture for kind, (architecture, _) in DENSE_FAMILIES.items()})
CONFIG_READERS.update({kind: functools.partial(reader, hf=READER_HELPERS)
                       for kind, (_, reader) in DENSE_FAMILIES.items()})

# Mixture-of-Experts families, each in its own module (txviz.loading.hf.families), handed the same helpers
MOE_FAMILIES = {"qwen2_moe": (qwen2_moe.ARCHITECTURE, qwen2_moe.qwen2_moe_config),
                "qwen3_moe": (qwen3_moe.ARCHITECTURE, qwen3_moe.qwen3_moe_config),
                "granitemoe": (granitemoe.ARCHITECTURE, granitemoe.granitemoe_config),
                "olmoe": (olmoe.ARCHITECTURE, olmoe.olmoe_config)}
SUPPORTED.update({kind: architecture for kind, (architecture, _) in MOE_FAMILIES.items()})
CONFIG_READERS.update({kind: functools.partial(reader, hf=READER_HELPERS)
                       for kind, (_, reader) in MOE_FAMILIES.items()})


def gemma3_multimodal_config(raw: dict) -> dict[str, Any]:
    """A multimodal Gemma 3 checkpoint's text decoder: its ``text_config`` read as Gemma 3's text model."""
    return gemma3_text_config(gemma3_multimodal.text_config(raw))


CONFIG_READERS["gemma3"] = gemma3_multimodal_config


CONFIG_READERS["gpt_oss"] = functools.partial(gpt_oss.gpt_oss_config, hf=READER_HELPERS)
# model_type → the quantization methods whose weights its loader dequantizes (OpenAI ships gpt-oss in MXFP4)
READABLE_QUANTIZATION: dict[str, tuple[str, ...]] = {"gpt_oss": (mxfp4.QUANT_METHOD,)}


def quantization_refusal(raw: dict, where: str) -> str | None:
    """Why a checkpoint's ``quantization_config`` keeps it from loading, or None when it has none or
    its family's loader dequantizes that method."""
    quantization = raw.get("quantization_config")
    if not quantization:
        return None
    method = quantization.get("quant_method", "?") if isinstance(quantization, dict) else "?"
    if method in READABLE_QUANTIZATION.get(model_type_of(raw), ()):
        return None
    return (f"{where} is a quantized checkpoint ({str(method)[:40]}); txviz loads unquantized safetensors weights "
            "(or GGUF files, or gpt-oss's MXFP4 experts)")


# ---- entry points -------------------------------------------------------------------------------
def model_type_of(raw: dict) -> str:
    """The family key, from ``model_type`` or else ``architectures``; unsupported ones are refused."""
    architectures = raw.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise ModelLoadError(f"config.json: architectures must be a list of names, got {architectures!r}")
    by_class = {cls: kind for kind, cls in SUPPORTED.items()}
    kind = raw.get("model_type") or (by_class.get(architectures[0]) if architectures else None)
    supported = ", ".join(f"{cls} ({kind})" for kind, cls in SUPPORTED.items())
    if kind is not None and not isinstance(kind, str):
        raise ModelLoadError(f"config.json: model_type must be a name, got {str(kind)[:80]!r}")
    if kind not in SUPPORTED:
        named = kind or (architectures[0] if architectures else "no model_type or architectures")
        raise ModelLoadError(f"unsupported model {named!r}; supported: {supported}")
    if architectures and architectures[0] != SUPPORTED[kind]:
        raise ModelLoadError(f"unsupported architecture {architectures[0]!r} for model_type {kind!r}: "
                             f"only causal language models are loaded; supported: {supported}")
    return kind


# The largest config.json read unless the caller hands in its own limit (the entry points hand in
# TXVIZ_MAX_CONFIG_BYTES, txviz.limits): real config.json files are a few KiB.
MAX_CONFIG_BYTES = Limits().max_config_bytes


def _read_config_file(source: str | os.PathLike, max_bytes: int) -> tuple[bytes, str]:
    path = Path(source)
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():  # also for paths the OS cannot take (a NUL in them)
        raise ModelLoadError(f"no config.json at {str(path)[:200]!r}")
    try:
        if path.stat().st_size > max_bytes:
            raise ModelLoadError(f"{path} is {path.stat().st_size} bytes: too large for a config.json "
                                 f"(limit {max_bytes}, TXVIZ_MAX_CONFIG_BYTES)")
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise ModelLoadError(f"cannot read {path}: {exc}") from exc


def parse_config_json(source: dict | bytes | str | os.PathLike, *,
                      max_bytes: int = MAX_CONFIG_BYTES) -> tuple[dict, str]:
    """(the config as a dict, where it came from). Accepts a dict, JSON text or bytes, a config.json
    path, or a directory holding one; text or a file over ``max_bytes`` is refused unparsed."""
    if isinstance(source, dict):
        return dict(source), "config dict"
    if isinstance(source, (bytes, bytearray)) or (isinstance(source, str) and source.lstrip().startswith("{")):
        text, origin = source, "config.json text"
    else:
        text, origin = _read_config_file(source, max_bytes)
    if len(text) > max_bytes:
        raise ModelLoadError(f"config.json of {len(text)} bytes is too large (limit {max_bytes}, "
                             "TXVIZ_MAX_CONFIG_BYTES)")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ModelLoadError(f"{origin} is not valid JSON: {str(exc)[:200]}") from exc
    if not isinstance(raw, dict):
        raise ModelLoadError(f"{origin} must hold a JSON object, got {type(raw).__name__}")
    return raw, origin


def config_from_dict(raw: dict, *, name: str, source: str) -> ModelConfig:
    """The ModelConfig of a parsed config.json; ModelLoadError if it is unsupported or inconsistent."""
    fields = CONFIG_READERS[model_type_of(raw)](raw)
    try:
        return ModelConfig(**fields, name=name, source=source)
    except ConfigError as exc:
        raise ModelLoadError(f"{source} describes a model txviz cannot build: {exc}") from exc


def read_hf_config(source: dict | bytes | str | os.PathLike, *, name: str | None = None,
                   max_bytes: int = MAX_CONFIG_BYTES) -> ModelConfig:
    """A ModelConfig from a Hugging Face config.json: a dict, its text or bytes, its path, or the
    checkpoint directory. Needs no weights."""
    raw, origin = parse_config_json(source, max_bytes=max_bytes)
    if name is None:
        from_path = not isinstance(source, (dict, bytes, bytearray)) and origin != "config.json text"
        name = Path(origin).parent.name if from_path else str(raw.get("_name_or_path") or raw.get("model_type"))
    return config_from_dict(raw, name=name, source=origin)
