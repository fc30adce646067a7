"""The numbers every decoder config gives, read once for all families: layers, widths, heads, the
vocabulary, the context, tied embeddings, and the family-specific spellings of KV heads
(Falcon's multi_query / new_decoder_architecture, MPT's attn_config)."""

from __future__ import annotations

from dataclasses import dataclass

from txviz.geometry.fields import Fields, GeometryError


@dataclass(frozen=True)
class Shape:
    n_layers: int
    d_model: int
    n_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    max_context: int | None
    tied: bool


def kv_heads_of(fields: Fields, model_type: str, n_heads: int, gqa: bool = True) -> int:
    raw = fields.raw
    if model_type == "falcon":
        kv_heads = fields.count("num_key_value_heads", default=n_heads)  # the new architecture's; read either way
        if fields.flag("new_decoder_architecture", False):
            return kv_heads
        return 1 if fields.flag("multi_query", True) else n_heads  # FalconConfig's default is multi-query
    if model_type == "mpt":
        attn = raw.get("attn_config") or {}
        if not isinstance(attn, dict):
            raise GeometryError("config.json: attn_config must be an object")
        kind = attn.get("attn_type", "multihead_attention")
        if kind == "multiquery_attention":
            return 1
        return Fields(attn, model_type).count("kv_n_heads", default=n_heads) if kind == "grouped_query_attention" \
            else n_heads
    return fields.count("num_key_value_heads", default=n_heads) if gqa else n_heads  # else left unread: named


def read_shape(fields: Fields, model_type: str, tied_default: bool, gqa: bool = True) -> Shape:
    n_layers, d_model = fields.count("num_hidden_layers"), fields.count("hidden_size")
    n_heads, vocab = fields.count("num_attention_heads"), fields.count("vocab_size")
    kv_heads = kv_heads_of(fields, model_type, n_heads, gqa)
    fields.check()
    explicit = fields.optional("head_dim")
    if explicit is None and d_model % n_heads:
        raise GeometryError(f"config.json: hidden_size {d_model} is not divisible by {n_heads} heads "
                            "and no head_dim is given")
    if n_heads % kv_heads:
        raise GeometryError(f"config.json: {n_heads} attention heads are not divisible by {kv_heads} KV heads")
    return Shape(n_layers, d_model, n_heads, kv_heads, explicit or d_model // n_heads, vocab,
                 fields.optional("max_position_embeddings"), fields.flag("tie_word_embeddings", tied_default))
