"""SmolLM3 (Hugging Face 2025): Llama with layers that use no positions at all (NoPE, Kazemnejad et al.
2023). ``no_rope_layers`` holds one flag per layer, 1 where the layer DOES rotate by RoPE (transformers'
name reads the other way round); without it every ``no_rope_layer_interval``-th layer skips RoPE. With
``use_sliding_window`` the NoPE layers are the ones that slide, unless ``layer_types`` says otherwise."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.families.layers import bounded_range, layer_kinds

ARCHITECTURE = "SmolLM3ForCausalLM"
# SmolLM3Config's defaults (over Llama's) for the keys a config may leave out
DEFAULTS = {"rope_theta": 2e6, "max_position_embeddings": 32768, "tie_word_embeddings": True,
            "use_sliding_window": False, "sliding_window": None, "no_rope_layers": None, "no_rope_layer_interval": 4}


def _rope_layers(hf: SimpleNamespace, raw: dict, n_layers: int) -> list[bool]:
    flags = raw["no_rope_layers"]
    if flags is None:
        interval = hf.count(raw, "no_rope_layer_interval")
        return [(i + 1) % interval != 0 for i in bounded_range(hf, n_layers)]
    if not isinstance(flags, list) or len(flags) != n_layers or any(f not in (0, 1) for f in flags):
        raise ModelLoadError(f"config.json: no_rope_layers must hold a 0 or 1 per layer ({n_layers}), "
                             f"got {str(flags)[:120]}")
    return [bool(f) for f in flags]


def smollm3_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**hf.llama_defaults, **DEFAULTS, **raw}
    fields = hf.llama_fields(raw)
    rope = _rope_layers(hf, raw, fields["n_layers"])
    window = raw.get("sliding_window") if hf.flag(raw, "use_sliding_window") else None
    sliding = [window is not None and not uses_rope for uses_rope in rope]
    return {**fields, "layer_rope": None if all(rope) else tuple(rope),
            **layer_kinds(hf, raw, fields["n_layers"], raw.get("sliding_window"), sliding)}
