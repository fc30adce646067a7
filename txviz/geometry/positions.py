"""Which layers apply RoPE and which none (NoPE beside RoPE, as in Llama 4, SmolLM3 and Cohere 2): a layer
without positions keeps K and V of the same width, so no byte changes, but the calculator shows it.

- ``no_rope_layers``: one entry per layer, 1 where RoPE is applied and 0 where it is not (Llama 4, SmolLM3);
- without the list, Llama 4 and SmolLM3 leave RoPE out of every ``no_rope_layer_interval``-th layer (4);
- Cohere 2 applies RoPE on its sliding layers only: its full-attention layers have no positions.
"""

from __future__ import annotations

from txviz.geometry.fields import Fields, GeometryError

INTERVAL_FAMILIES = ("llama4_text", "smollm3")  # the config classes that derive no_rope_layers from an interval


def rope_layers(fields: Fields, n_layers: int) -> tuple[bool, ...]:
    """For each layer, whether it applies RoPE."""
    listed = fields.raw.get("no_rope_layers")
    if listed is not None:
        if not isinstance(listed, list) or len(listed) != n_layers or any(v not in (0, 1) for v in listed):
            raise GeometryError(f"config.json: no_rope_layers must list {n_layers} entries of 1 (RoPE) or 0 (none)")
        return tuple(bool(v) for v in listed)
    if fields.model_type in INTERVAL_FAMILIES:
        interval = fields.count("no_rope_layer_interval", default=4)
        return tuple((i + 1) % interval != 0 for i in range(n_layers))
    return tuple(True for _ in range(n_layers))


def positionless_layers(fields: Fields, types: tuple[str, ...], rope_on_sliding_only: bool) -> tuple[int, ...]:
    """The layers that apply no positions, given each layer's type."""
    if rope_on_sliding_only:
        return tuple(i for i, t in enumerate(types) if t == "full_attention")
    return tuple(i for i, rope in enumerate(rope_layers(fields, len(types))) if not rope)
