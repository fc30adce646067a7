"""Per-layer choices written as lists in config.json: which layers slide over a window (``layer_types``),
read the way transformers reads them (the families' own rules give the list a config leaves out)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.errors import ModelLoadError


def bounded_range(hf: SimpleNamespace, n_layers: int) -> range:
    """range(n_layers), once the count is known not to be absurd (before a list of that many is built)."""
    hf.bounded_layers(n_layers)
    return range(n_layers)


def layer_kinds(hf: SimpleNamespace, raw: dict, n_layers: int, window: int | None,
                sliding: list[bool]) -> dict[str, Any]:
    """``sliding_window`` and ``layer_types`` fields: the config's ``layer_types`` where it has them, else
    ``sliding`` (transformers' derived default); one window for every sliding layer."""
    types = raw.get("layer_types")
    if types is None:
        types = ["sliding_attention" if s else "full_attention" for s in sliding]
    if not isinstance(types, list) or any(t not in hf.layer_type_names for t in types):
        raise ModelLoadError(f"config.json: layer_types must list {sorted(hf.layer_type_names)}, "
                             f"got {str(types)[:120]}")
    if len(types) != n_layers:
        raise ModelLoadError(f"config.json: layer_types has {len(types)} entries for {n_layers} layers")
    kinds = tuple(hf.layer_type_names[t] for t in types)
    if "sliding" not in kinds:
        return {"sliding_window": None, "layer_types": None}
    if window is None:
        raise ModelLoadError("config.json: layer_types has sliding layers but the sliding window is off "
                             "(use_sliding_window false or sliding_window null)")
    return {"sliding_window": hf.count({"sliding_window": window}, "sliding_window"), "layer_types": kinds}
