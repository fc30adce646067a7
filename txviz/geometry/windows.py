"""Which layers keep a sliding window, per family (the window itself is ``sliding_window``):

- an explicit ``layer_types`` list ("sliding_attention" / "full_attention") wins everywhere;
- all:    every layer (Mistral, Mixtral, Phi-3, StarCoder2);
- qwen2:  only with ``use_sliding_window``, the layers from ``max_window_layers`` on (Qwen2, Qwen3);
- gemma2: every other layer, starting with the first (Gemma 2: local, global, local, …);
- gemma3: all but every ``sliding_window_pattern``-th layer (Gemma 3: 5 local, then 1 global);
- none:   no layer, whatever the config says.
"""

from __future__ import annotations

from txviz.geometry.fields import Fields, GeometryError

SLIDING, FULL = "sliding_attention", "full_attention"


def _from_layer_types(layer_types, n_layers: int) -> tuple[bool, ...]:
    if not isinstance(layer_types, list) or len(layer_types) != n_layers or \
            any(t not in (SLIDING, FULL, "chunked_attention") for t in layer_types):
        raise GeometryError(f"config.json: layer_types must list {n_layers} entries of {SLIDING!r} or {FULL!r}")
    return tuple(t == SLIDING for t in layer_types)


def sliding_layers(fields: Fields, rule: str, n_layers: int) -> tuple[bool, ...]:
    """For each layer, whether it keeps a window (before knowing the window's width)."""
    if fields.raw.get("layer_types") is not None:
        return _from_layer_types(fields.raw["layer_types"], n_layers)
    layers = range(n_layers)
    if rule == "all":
        return tuple(True for _ in layers)
    if rule == "qwen2":
        if not fields.flag("use_sliding_window", False):
            return tuple(False for _ in layers)
        first = fields.count("max_window_layers", default=28, minimum=0)
        return tuple(i >= first for i in layers)
    if rule == "gemma2":
        return tuple(i % 2 == 0 for i in layers)
    if rule == "gemma3":
        pattern = fields.count("sliding_window_pattern", default=6)
        return tuple((i + 1) % pattern != 0 for i in layers)
    return tuple(False for _ in layers)


def layer_windows(fields: Fields, rule: str, n_layers: int) -> tuple[int | None, ...]:
    """Tokens each layer keeps: ``sliding_window`` on the layers the rule picks, None elsewhere."""
    window = fields.optional("sliding_window")
    sliding = sliding_layers(fields, rule, n_layers)
    if window is None:
        if any(sliding) and fields.raw.get("layer_types") is not None:
            raise GeometryError("config.json: layer_types names sliding layers but sliding_window is not set")
        return tuple(None for _ in sliding)
    return tuple(window if s else None for s in sliding)
