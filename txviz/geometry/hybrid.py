"""Hybrid decoders whose layers mostly keep no K and V (after transformers' modules for each):

- Jamba (AI21 2024): attention on every ``attn_layer_period``-th layer from ``attn_layer_offset``, Mamba
  elsewhere; experts on every ``expert_layer_period``-th layer from ``expert_layer_offset``. A Mamba layer's
  state per sequence: a convolution window of ``mamba_d_conv`` columns and an SSM state of ``mamba_d_state``,
  each over ``mamba_expand`` × hidden channels (transformers' cache keeps the kernel's whole width).
- Qwen3-Next: ``layer_types`` (else every ``full_attention_interval``-th layer) of gated attention (its
  query projection doubles as an output gate; RMSNorms on q and k) and gated DeltaNet linear attention,
  whose state per sequence is a recurrent matrix of ``linear_key_head_dim`` × ``linear_value_head_dim`` per
  value head, plus a convolution window over the q, k and v channels; MoE as Qwen2-MoE (a gated shared
  expert) on every ``decoder_sparse_step``-th layer not in ``mlp_only_layers``.

- Granite 4.0 hybrids (granitemoehybrid): ``layer_types`` of Mamba-2 ("mamba") and attention layers; a
  Mamba-2 layer's state is ``mamba_n_heads`` × ``mamba_d_head`` × ``mamba_d_state`` plus a convolution
  window over its x, B and C channels; every layer has routed experts (``num_local_experts``, none for the
  dense models) and an ungated-in-name but gated shared MLP of ``shared_intermediate_size``; attention
  applies RoPE only when ``position_embedding_type`` is "rope".

Jamba's attention layers apply no positions (its Mamba layers carry the order). The state does not grow with
the context: the calculator adds it once per sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from txviz.geometry import params
from txviz.geometry.decoder import Moe, add_ffn, read_moe
from txviz.geometry.families import Traits
from txviz.geometry.fields import Fields, GeometryError, architectures
from txviz.geometry.geometry import FULL, Geometry
from txviz.geometry.shape import read_shape
from txviz.geometry.windows import layer_types


def _mamba(f: Fields, d: int) -> tuple[int, int, int]:
    """(a Mamba mixer's parameters, its biases and norm weights, its state elements per sequence)."""
    inner = f.count("mamba_expand", default=2) * d
    d_state, d_conv = f.count("mamba_d_state", default=16), f.count("mamba_d_conv", default=4)
    rank = f.raw.get("mamba_dt_rank", "auto")
    rank = math.ceil(d / 16) if rank == "auto" else f.count("mamba_dt_rank")
    conv_bias, proj_bias = f.flag("mamba_conv_bias", True), f.flag("mamba_proj_bias", False)
    matrices = (params.linear(d, 2 * inner) + inner * d_conv + params.linear(inner, rank + 2 * d_state)
                + params.linear(rank, inner) + params.linear(inner, d))
    small = (inner * d_state + inner  # A_log, D
             + (2 * inner + d) * proj_bias + inner * conv_bias + inner  # in/out biases, conv and dt biases
             + rank + 2 * d_state)  # the dt, B and C RMSNorms
    return matrices, small, inner * (d_conv + d_state)


def _deltanet(f: Fields, d: int) -> tuple[int, int, int]:
    """(a gated DeltaNet's parameters, its small ones, its state elements per sequence)."""
    k_heads, v_heads = f.count("linear_num_key_heads"), f.count("linear_num_value_heads")
    k_dim, v_dim = f.count("linear_key_head_dim"), f.count("linear_value_head_dim")
    kernel = f.count("linear_conv_kernel_dim", default=4)
    keys, values = k_heads * k_dim, v_heads * v_dim
    conv = 2 * keys + values
    matrices = params.linear(d, 2 * keys + 2 * values) + params.linear(d, 2 * v_heads) + conv * kernel \
        + params.linear(values, d)
    small = 2 * v_heads + v_dim  # dt_bias, A_log, the gated RMSNorm
    return matrices, small, v_heads * k_dim * v_dim + conv * kernel


def _mamba2(f: Fields, d: int) -> tuple[int, int, int]:
    """(a Mamba-2 mixer's parameters, its small ones, its state elements per sequence)."""
    inner, heads = f.count("mamba_expand", default=2) * d, f.count("mamba_n_heads", default=128)
    f.raw.get("mamba_d_head")  # inner / heads, which the config class checks
    groups, d_state = f.count("mamba_n_groups", default=1), f.count("mamba_d_state", default=256)
    kernel = f.count("mamba_d_conv", default=4)
    conv = inner + 2 * groups * d_state  # x, B and C go through the convolution
    conv_bias, proj_bias = f.flag("mamba_conv_bias", True), f.flag("mamba_proj_bias", False)
    matrices = params.linear(d, inner + conv + heads) + conv * kernel + params.linear(inner, d)
    small = 3 * heads + inner + conv * conv_bias + (inner + conv + heads + d) * proj_bias  # dt_bias, A_log, D, norm
    return matrices, small, inner * d_state + conv * kernel


GRANITE_NAMES = {"mamba": "mamba", "linear_attention": "mamba", "attention": FULL, "full_attention": FULL}


def _granite_types(f: Fields, n: int) -> tuple[str, ...]:
    listed = f.raw.get("layer_types", f.raw.get("layers_block_type"))
    if listed is None:
        return tuple("mamba" for _ in range(n))  # the config class's default
    if not isinstance(listed, list) or len(listed) != n or any(t not in GRANITE_NAMES for t in listed):
        raise GeometryError(f"config.json: layer_types must list {n} entries of 'mamba' or 'attention'")
    return tuple(GRANITE_NAMES[t] for t in listed)


def _jamba_layers(f: Fields, n: int) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    period, offset = f.count("attn_layer_period", default=8), f.count("attn_layer_offset", default=4, minimum=0)
    e_period, e_offset = f.count("expert_layer_period", default=2), f.count("expert_layer_offset", default=1,
                                                                            minimum=0)
    if offset >= period or e_offset >= e_period:
        raise GeometryError("config.json: attn_layer_offset and expert_layer_offset must be below their periods")
    types = tuple(FULL if i % period == offset else "mamba" for i in range(n))
    return types, tuple(i % e_period == e_offset for i in range(n))


def _qwen3_next_types(f: Fields, n: int) -> tuple[str, ...]:
    if f.raw.get("layer_types") is not None:
        return layer_types(f, "listed", n)
    interval = f.count("full_attention_interval", default=4)
    return tuple(FULL if (i + 1) % interval == 0 else "linear_attention" for i in range(n))


@dataclass(frozen=True)
class Mixers:
    """A hybrid's layer types and routed experts, its state-keeping mixer's parameters (matrices, small ones)
    and state per sequence, and what its attention layers add: a gate as wide as the queries, q/k norms."""

    types: tuple[str, ...]
    moe: Moe | None
    mixer: int
    mixer_small: int
    state: int
    query_gate: bool
    qk_norms: int
    attention_positionless: bool = False  # the attention layers apply no positions
    dense_width: int | None = None  # the MLP of layers without experts, when not intermediate_size


def _mixers(f: Fields, model_type: str, n: int, d: int, head_dim: int) -> Mixers:
    if model_type == "jamba":
        types, expert_layers = _jamba_layers(f, n)
        moe = Moe(expert_layers, f.count("num_experts"), f.count("num_experts_per_tok"),
                  f.count("intermediate_size")) if f.count("num_experts", default=1) > 1 else None
        return Mixers(types, moe, *_mamba(f, d), query_gate=False, qk_norms=0, attention_positionless=True)
    if model_type == "granitemoehybrid":
        shared, experts = f.count("shared_intermediate_size", default=1024), f.count("num_experts", default=8, minimum=0)
        moe = Moe(tuple(True for _ in range(n)), experts, f.count("num_experts_per_tok", default=2),
                  f.count("intermediate_size"), shared_width=shared, shared_gate=False) if experts else None
        rope = f.raw.get("position_embedding_type") == "rope"
        return Mixers(_granite_types(f, n), moe, *_mamba2(f, d), query_gate=False, qk_norms=0,
                      attention_positionless=not rope, dense_width=shared)
    f.raw.get("use_sliding_window")  # Qwen3NextConfig has no windows: transformers reads no such key
    types, moe = _qwen3_next_types(f, n), read_moe(f, Traits(moe="qwen_moe"), n)
    return Mixers(types, moe, *_deltanet(f, d), query_gate=True, qk_norms=2 * head_dim)


def read_hybrid(f: Fields, model_type: str) -> Geometry:
    shape = read_shape(f, model_type, False)
    n, d = shape.n_layers, shape.d_model
    parts = _mixers(f, model_type, n, d, shape.head_dim)
    moe = parts.moe
    dense = parts.dense_width or f.count("intermediate_size", default=0 if moe and all(moe.layers) else None)
    f.check()
    bias = f.flag("attention_bias", False)
    gate = shape.n_heads * shape.head_dim if parts.query_gate else 0  # the query projection's second half
    attention = [params.attention(d, shape.n_heads, shape.kv_heads, shape.head_dim, qkv_bias=b, out_bias=b)
                 + params.linear(d, gate, b) for b in (bias, False)]
    tally = params.Tally()
    tally.add(shape.vocab_size * d, "embeddings", multiplied=shape.tied)
    widths = []
    for layer, kind in enumerate(parts.types):
        tally.add(2 * d, "small", multiplied=False)  # the two RMSNorms around the mixer and the FFN
        if kind == FULL:
            tally.biased(*attention, "attention")
            tally.add(parts.qk_norms, "small", multiplied=False)
        else:
            tally.add(parts.mixer, "attention")
            tally.add(parts.mixer_small, "small", multiplied=False)
        widths.append(add_ffn(tally, moe, layer, d, dense, True, False))
    tally.add(d, "small", multiplied=False)
    tally.add(0 if shape.tied else d * shape.vocab_size, "embeddings")
    mtp = f.raw.get("mtp_num_hidden_layers") or f.raw.get("num_nextn_predict_layers")
    return Geometry(
        model_type=model_type, architecture=(architectures(f.raw) or [model_type])[0], n_layers=n, d_model=d,
        vocab_size=shape.vocab_size, n_heads=shape.n_heads, kv_heads=(shape.kv_heads,) * n,
        head_dims=(shape.head_dim,) * n, windows=(None,) * n, layer_types=parts.types,
        positionless=tuple(i for i, t in enumerate(parts.types) if t == FULL and parts.attention_positionless),
        state_elements=tuple(0 if t == FULL else parts.state for t in parts.types),
        n_params=tally.total, active_params=tally.active, unmultiplied_params=tally.unmultiplied,
        ffn_width=max(widths), tied_embeddings=shape.tied, max_context=shape.max_context,
        n_experts=moe.n_experts if moe else 0, experts_per_token=moe.used if moe else 0,
        shared_experts=int(bool(moe and moe.shared_width)), moe_layers=sum(moe.layers) if moe else 0,
        kv_bias=bias, param_groups=tuple(tally.groups.items()),
        notes=("multi-token-prediction layers not counted",) if mtp else ())
