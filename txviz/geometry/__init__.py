"""The geometry of any Hugging Face causal-LM config.json, for memory and compute analysis without
weights and without a runnable ModelConfig: a model txviz cannot run is still fully analysable.

    read_geometry(raw_dict) -> Geometry        read_config(path | bytes | dict) -> Geometry

Families (txviz.geometry.families): llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma,
gemma2, gemma3_text (and gemma3 with a nested text_config), phi, phi3, falcon, gpt2, gpt_neox, gptj,
bloom, mpt, olmo, olmo2, starcoder2, cohere, cohere2, smollm3, llama4_text (and llama4 with a nested
text_config), gpt_oss, olmoe, granitemoe; deepseek_v2 / deepseek_v3 / kimi_k2 (MLA, txviz.geometry.mla);
jamba and qwen3_next
(layers that keep a state instead of K and V, txviz.geometry.hybrid). Any other model_type is read by the
generic rule (txviz.geometry.generic), whose assumptions come back in ``Geometry.assumptions``. Every key
of the config that no reader looked at and that could change the figures comes back, as a warning, in
``Geometry.ignored`` (txviz.geometry.unread). A published ``quantization_config`` (fp8, mxfp4, bitsandbytes, GPTQ, AWQ) gives
``Geometry.weight_format`` (txviz.geometry.quantization). Bad or missing numbers raise ``GeometryError`` (a ValueError) naming them.
"""

from __future__ import annotations

from dataclasses import replace

from txviz.geometry.decoder import read_decoder
from txviz.geometry.families import CONFIG_DEFAULTS, HYBRID_TYPES, KNOWN_TYPES, MLA_TYPES, TRAITS, TYPE_ALIASES
from txviz.geometry.fields import Fields, GeometryError, architectures, text_part
from txviz.geometry.generic import read_generic
from txviz.geometry.geometry import Geometry
from txviz.geometry.hybrid import read_hybrid
from txviz.geometry.mla import read_mla
from txviz.geometry.quantization import read_quantization
from txviz.geometry.unread import unread_warnings

__all__ = ["Geometry", "GeometryError", "KNOWN_TYPES", "read_config", "read_geometry", "model_type_of"]


def model_type_of(raw: dict) -> str:
    """The family: the language model's own model_type (a nested text_config's first), else the
    architecture's name."""
    text = text_part(raw)
    kind = text.get("model_type") if "text_config" in raw else None
    kind = kind or raw.get("model_type") or (architectures(raw) or [None])[0]
    if not isinstance(kind, str) or not kind:
        raise GeometryError("config.json has no model_type (or architectures): cannot tell what it describes")
    return TYPE_ALIASES.get(kind, kind)


def read_geometry(raw: dict) -> Geometry:
    if not isinstance(raw, dict):
        raise GeometryError(f"config.json must hold a JSON object, got {type(raw).__name__}")
    model_type = model_type_of(raw)
    fields = Fields({**CONFIG_DEFAULTS.get(model_type, {}), **text_part(raw)}, model_type)
    if model_type in MLA_TYPES:
        geometry = read_mla(fields, model_type)
    elif model_type in HYBRID_TYPES:
        geometry = read_hybrid(fields, model_type)
    elif model_type in TRAITS:
        geometry = read_decoder(fields, TRAITS[model_type], model_type)
    else:
        geometry = read_generic(fields, model_type)
    weight_format, unread = read_quantization(raw, dict(geometry.param_groups))
    notes = ("the vision tower is not counted: text model only",) if "vision_config" in raw else ()
    own_keys = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw  # not a wrapper's own keys
    ignored = unread_warnings(own_keys, fields.seen | {"quantization_config", "text_config", "vision_config"})
    return replace(geometry, weight_format=weight_format, notes=geometry.notes + notes + ((unread,) if unread else ()),
                   ignored=ignored)


def read_config(source, *, max_bytes: int | None = None) -> Geometry:
    """A config.json's geometry: a dict, its bytes or text, a path, or the directory holding it; one over
    ``max_bytes`` (default: txviz.loading.hf.config.MAX_CONFIG_BYTES) is refused unparsed."""
    from txviz.loading.hf.config import MAX_CONFIG_BYTES, parse_config_json

    return read_geometry(parse_config_json(source, max_bytes=max_bytes or MAX_CONFIG_BYTES)[0])
