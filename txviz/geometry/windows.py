"""Each layer's attention type and the tokens it keeps, per family, read as transformers' config classes
derive ``layer_types`` (the window itself is ``sliding_window``; a chunk is ``attention_chunk_size``):

- an explicit ``layer_types`` list ("full_attention", "sliding_attention", "chunked_attention",
  "linear_attention") wins wherever the family's config class has one; the classes of the "none" and "all"
  families read none, so there it is left unread and named as ignored (txviz.geometry.unread);
- all:     every layer slides (Mistral, Mixtral, Phi-3, StarCoder2);
- listed:  every layer slides unless ``layer_types`` says otherwise (a family read by the generic rule);
- qwen2:   only with ``use_sliding_window``, the layers from ``max_window_layers`` on (Qwen2, Qwen3);
- qwen2_moe: only with ``use_sliding_window``, every other layer from the first, below ``max_window_layers``;
- qwen3_moe: only with ``use_sliding_window``, every layer (its config class has no ``layer_types``);
- gemma2:  every other layer, starting with the first (Gemma 2: local, global, local, …);
- gemma3:  all but every ``sliding_window_pattern``-th layer (Gemma 3: 5 local, then 1 global; Cohere 2: 3 and 1);
- smollm3: with ``use_sliding_window`` and a window, the layers without RoPE (``no_rope_layers``);
- llama4:  the RoPE layers attend within chunks of ``attention_chunk_size``, the others to everything;
- none:    no layer, whatever the config says.

A chunked layer is sized as transformers' cache holds it: at most a chunk of tokens (the last
``attention_chunk_size``), like a window of that width.
"""

from __future__ import annotations

from txviz.geometry.fields import Fields, GeometryError
from txviz.geometry.geometry import CHUNKED, FULL, LAYER_TYPES, SLIDING
from txviz.geometry.positions import rope_layers

PATTERN_DEFAULTS = {"gemma3": 6, "cohere2": 4}  # the config classes' sliding_window_pattern
# Llama, Gemma, Mistral, Mixtral, Phi-3, StarCoder2, Qwen3-MoE: their config classes have no layer_types field
IGNORES_LAYER_TYPES = ("none", "all", "qwen3_moe")
SWITCHED = ("qwen2", "qwen2_moe", "qwen3_moe")  # classes that drop sliding_window while use_sliding_window is off
# what a config class derives its layer_types from: understood when the list itself is read
DERIVED_FROM = ("use_sliding_window", "max_window_layers", "sliding_window_pattern")


def _from_layer_types(layer_types, n_layers: int) -> tuple[str, ...]:
    if not isinstance(layer_types, list) or len(layer_types) != n_layers or \
            any(t not in LAYER_TYPES for t in layer_types):
        raise GeometryError(f"config.json: layer_types must list {n_layers} entries among "
                            f"{', '.join(map(repr, LAYER_TYPES))}")
    return tuple(layer_types)


def _windows_on(fields: Fields) -> bool:
    """Qwen2's and SmolLM3's switch; max_window_layers is read with it (it changes nothing while it is off)."""
    fields.raw.get("max_window_layers")
    return fields.flag("use_sliding_window", False)


def _by_rule(fields: Fields, rule: str, n_layers: int) -> tuple[str, ...]:
    layers = range(n_layers)
    slides: tuple[bool, ...] = tuple(False for _ in layers)
    if rule in ("all", "listed"):
        slides = tuple(True for _ in layers)
    elif rule in SWITCHED + ("smollm3",) and not _windows_on(fields):
        pass  # use_sliding_window off: no window, whatever max_window_layers says
    elif rule == "qwen2":
        first = fields.count("max_window_layers", default=28, minimum=0)
        slides = tuple(i >= first for i in layers)
    elif rule == "qwen2_moe":
        below = fields.count("max_window_layers", default=28, minimum=0)
        slides = tuple(i % 2 == 0 and i < below for i in layers)
    elif rule == "qwen3_moe":
        slides = tuple(True for _ in layers)
    elif rule == "gemma2":
        slides = tuple(i % 2 == 0 for i in layers)
    elif rule in PATTERN_DEFAULTS:
        pattern = fields.count("sliding_window_pattern", default=PATTERN_DEFAULTS[rule])
        slides = tuple((i + 1) % pattern != 0 for i in layers)
    elif rule == "smollm3":  # SmolLM3Config reads no max_window_layers
        slides = tuple(not rope for rope in rope_layers(fields, n_layers))
    elif rule == "llama4":
        chunked = fields.raw.get("attention_chunk_size") is not None
        return tuple(CHUNKED if rope and chunked else FULL for rope in rope_layers(fields, n_layers))
    return tuple(SLIDING if s else FULL for s in slides)


def layer_types(fields: Fields, rule: str, n_layers: int) -> tuple[str, ...]:
    """Each layer's type (txviz.geometry.geometry.LAYER_TYPES)."""
    if rule not in IGNORES_LAYER_TYPES and fields.raw.get("layer_types") is not None:
        for key in DERIVED_FROM:
            fields.raw.get(key)
        return _from_layer_types(fields.raw["layer_types"], n_layers)
    return _by_rule(fields, rule, n_layers)


def layer_windows(fields: Fields, rule: str, n_layers: int) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    """(each layer's type, the tokens it keeps: ``sliding_window`` on sliding layers,
    ``attention_chunk_size`` on chunked ones, None elsewhere)."""
    types = layer_types(fields, rule, n_layers)
    switched_off = rule in SWITCHED and not _windows_on(fields)
    if switched_off:
        fields.raw.get("sliding_window")  # understood: the class drops it (Qwen2-MoE writes 0 in its place)
    window = None if rule == "none" or switched_off else fields.optional("sliding_window")  # Llama keeps none
    chunk = fields.optional("attention_chunk_size") if CHUNKED in types else None
    if CHUNKED in types and chunk is None:
        raise GeometryError("config.json: layer_types names chunked layers but attention_chunk_size is not set")
    if window is None and SLIDING in types:
        if rule not in IGNORES_LAYER_TYPES and fields.raw.get("layer_types") is not None and not switched_off:
            raise GeometryError("config.json: layer_types names sliding layers but sliding_window is not set")
        types = tuple(FULL if t == SLIDING else t for t in types)  # a rule's windows need a width
    return types, tuple(window if t == SLIDING else chunk if t == CHUNKED else None for t in types)
