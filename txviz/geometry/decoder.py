"""The reader for every family whose attention caches K and V per head (all but DeepSeek's MLA): the
config's shape and the family's ``Traits`` (txviz.geometry.families) give each layer's pieces, whose
parameters txviz.geometry.params counts; a MoE layer holds all its experts and runs its top-k."""

from __future__ import annotations

from dataclasses import dataclass

from txviz.geometry import params
from txviz.geometry.families import Traits
from txviz.geometry.fields import Fields, GeometryError, architectures
from txviz.geometry.geometry import Geometry
from txviz.geometry.shape import Shape, read_shape
from txviz.geometry.positions import positionless_layers
from txviz.geometry.windows import layer_windows


@dataclass(frozen=True)
class Moe:
    """Routed experts of ``width`` on the layers in ``layers``; ``shared_width``: a shared expert's."""

    layers: tuple[bool, ...]
    n_experts: int
    used: int
    width: int
    shared_width: int = 0
    shared_gate: bool = True  # the shared expert's sigmoid gate (Qwen2-MoE; Llama 4 has none)


def _bias(fields: Fields, rule: tuple[str | None, bool]) -> bool:
    key, default = rule
    return fields.flag(key, default) if key else default


def ffn_width(fields: Fields, traits: Traits, model_type: str, d_model: int) -> int:
    if model_type == "mpt":
        width = fields.number("expansion_ratio", 4) * d_model
        if not width.is_integer():
            raise GeometryError(f"config.json: expansion_ratio × d_model = {width} is not a whole width")
        return int(width)
    if traits.moe == "llama4":  # the dense layers between the MoE ones
        return fields.count("intermediate_size_mlp")
    default = traits.ffn_default_mult * d_model if traits.ffn_default_mult else None
    return fields.count("intermediate_size", default=default)


def read_moe(fields: Fields, traits: Traits, n_layers: int) -> Moe | None:
    if traits.moe == "mixtral":
        return Moe(tuple(True for _ in range(n_layers)), fields.count("num_local_experts"),
                   fields.count("num_experts_per_tok"), fields.count("intermediate_size"))
    if traits.moe == "llama4":
        return _llama4_moe(fields, n_layers)
    if traits.moe != "qwen_moe" or not fields.count("num_experts", default=0, minimum=0):
        return None
    step = fields.count("decoder_sparse_step", default=1)
    dense = fields.raw.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(isinstance(i, int) for i in dense):
        raise GeometryError("config.json: mlp_only_layers must be a list of layer numbers")
    dense = set(dense)  # a list as long as the file allows, looked up once per layer
    layers = tuple(i not in dense and (i + 1) % step == 0 for i in range(n_layers))
    return Moe(layers, fields.count("num_experts"), fields.count("num_experts_per_tok"),
               fields.count("moe_intermediate_size"),
               fields.count("shared_expert_intermediate_size", default=0, minimum=0))


def _layer_list(fields: Fields, key: str) -> set[int] | None:
    listed = fields.raw.get(key)
    if listed is None:
        return None
    if not isinstance(listed, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in listed):
        raise GeometryError(f"config.json: {key} must be a list of layer numbers")
    return set(listed)


def _llama4_moe(fields: Fields, n_layers: int) -> Moe:
    """Llama 4: routed experts and one ungated shared expert, both ``intermediate_size`` wide, on the layers
    ``moe_layers`` lists, else on every ``interleave_moe_layer_step``-th."""
    step = fields.count("interleave_moe_layer_step", default=1)
    listed = _layer_list(fields, "moe_layers")
    layers = listed if listed is not None else set(range(step - 1, n_layers, step))
    width = fields.count("intermediate_size")
    return Moe(tuple(i in layers for i in range(n_layers)), fields.count("num_local_experts"),
               fields.count("num_experts_per_tok"), width, shared_width=width, shared_gate=False)


def norms_per_layer(fields: Fields, traits: Traits, model_type: str) -> int:
    if model_type != "falcon":
        return traits.norms_per_layer
    parallel = fields.flag("parallel_attn", True)  # the new architecture is parallel whatever this says
    if fields.flag("new_decoder_architecture", False):
        return fields.count("num_ln_in_parallel_attn", default=2)
    return 1 if parallel else 2


def qk_norm_params(fields: Fields, traits: Traits, shape: Shape) -> int:
    if traits.qk_norm == "weightless":  # Llama 4's L2 norm holds no weights, whatever use_qk_norm says
        fields.flag("use_qk_norm", True)
        return 0
    q, kv = shape.n_heads * shape.head_dim, shape.kv_heads * shape.head_dim
    if traits.qk_norm == "head":
        return 2 * params.norm(traits.norm, shape.head_dim)
    if traits.qk_norm == "full" or fields.flag("use_qk_norm", False):  # OLMo 2; Cohere's Command R+
        return params.norm(traits.norm, q) + params.norm(traits.norm, kv)
    if fields.flag("qk_layernorm", False):  # Phi
        return 2 * params.norm("layernorm", shape.head_dim)
    return 0


def _embeddings(tally: params.Tally, fields: Fields, traits: Traits, shape: Shape) -> None:
    table = shape.vocab_size * shape.d_model
    tally.add(table, "embeddings", multiplied=shape.tied)  # a tied table is also the output head: it is multiplied
    if traits.learned_positions:
        if shape.max_context is None:
            fields.missing.append("max_position_embeddings")
            fields.check()
        tally.add(shape.max_context * shape.d_model, "embeddings", multiplied=False)
    if traits.embedding_norm:
        tally.add(params.norm(traits.norm, shape.d_model), "small", multiplied=False)


def _output(tally: params.Tally, traits: Traits, shape: Shape) -> None:
    tally.add(params.norm(traits.norm, shape.d_model), "small", multiplied=False)
    if not shape.tied:
        tally.add(shape.d_model * shape.vocab_size, "embeddings")
    if traits.lm_head_bias:
        tally.add(shape.vocab_size, "small", multiplied=False)


def add_ffn(tally: params.Tally, moe: Moe | None, layer: int, d: int, dense_width: int, gated: bool,
         bias: bool, router_bias: bool = False) -> int:
    """Adds one layer's FFN; returns the hidden width a token runs through."""
    if moe is None or not moe.layers[layer]:
        tally.biased(*(params.mlp(d, dense_width, gated=gated, bias=b) for b in (bias, False)), "mlp")
        return dense_width
    tally.biased(params.linear(d, moe.n_experts, router_bias), params.linear(d, moe.n_experts), "router")
    tally.experts(moe.n_experts, params.mlp(d, moe.width, gated=gated, bias=bias), moe.used)  # gpt-oss biases them
    if moe.shared_width:  # Qwen2-MoE: one shared expert and its sigmoid gate; Llama 4: without the gate
        tally.add(params.mlp(d, moe.shared_width, gated=gated, bias=False), "mlp")
        if moe.shared_gate:
            tally.add(params.linear(d, 1), "router")
    return moe.used * moe.width + moe.shared_width


def read_decoder(fields: Fields, traits: Traits, model_type: str, *, assumptions: tuple[str, ...] = ()) -> Geometry:
    shape = read_shape(fields, model_type, traits.tied_default, traits.gqa)
    width, moe = ffn_width(fields, traits, model_type, shape.d_model), read_moe(fields, traits, shape.n_layers)
    fields.check()
    qkv_bias, mlp_bias = _bias(fields, traits.qkv_bias), _bias(fields, traits.mlp_bias)
    norms = norms_per_layer(fields, traits, model_type) * params.norm(traits.norm, shape.d_model) \
        + qk_norm_params(fields, traits, shape)
    attention = [params.attention(shape.d_model, shape.n_heads, shape.kv_heads, shape.head_dim, qkv_bias=b,
                                  out_bias=b and traits.out_bias) for b in (qkv_bias, False)]
    sinks = shape.n_heads if traits.attention_sinks else 0
    tally = params.Tally()
    _embeddings(tally, fields, traits, shape)
    widths = []
    for layer in range(shape.n_layers):
        tally.add(norms + sinks, "small", multiplied=False)
        tally.biased(*attention, "attention")
        widths.append(add_ffn(tally, moe, layer, shape.d_model, width, traits.gated, mlp_bias, traits.router_bias))
    _output(tally, traits, shape)
    n = shape.n_layers
    types, windows = layer_windows(fields, traits.windows, n)
    architecture = (architectures(fields.raw) or [model_type])[0]
    return Geometry(
        model_type=model_type, architecture=architecture, n_layers=n, d_model=shape.d_model,
        vocab_size=shape.vocab_size, n_heads=shape.n_heads, kv_heads=(shape.kv_heads,) * n,
        head_dims=(shape.head_dim,) * n, windows=windows, layer_types=types,
        positionless=positionless_layers(fields, types, traits.rope_on_sliding_only), attention_sinks=sinks,
        n_params=tally.total, active_params=tally.active, unmultiplied_params=tally.unmultiplied,
        ffn_width=max(widths),
        tied_embeddings=shape.tied, max_context=shape.max_context,
        n_experts=moe.n_experts if moe else 0, experts_per_token=moe.used if moe else 0,
        shared_experts=int(bool(moe and moe.shared_width)), moe_layers=sum(moe.layers) if moe else 0,
        kv_bias=qkv_bias, param_groups=tuple(tally.groups.items()), assumptions=assumptions)
