"""What a custom component sends back, read at the boundary. A component's value comes from the browser,
where anyone can send anything (a layer of ``'x'``, ``null``, ``1e308``, ``9999``, a list instead of a
cell): a handler reads it with these and ignores what is not a choice the reader could have made,
instead of raising in the session or putting an impossible layer into the page's state."""

from __future__ import annotations

import math
from typing import Any


def index_of(value: Any, count: int) -> int | None:
    """``value`` as an index in ``range(count)``: a whole number (an int, or a float with no fraction,
    as JSON numbers arrive), never a bool or a string; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    index = int(value)
    return index if 0 <= index < count else None


def cell_of(value: Any, n_layers: int, n_heads: int) -> tuple[int, int] | None:
    """``{"layer": l, "head": h}`` as (layer, head) inside the model; None for anything else."""
    if not isinstance(value, dict):
        return None
    layer, head = index_of(value.get("layer"), n_layers), index_of(value.get("head"), n_heads)
    return None if layer is None or head is None else (layer, head)


def sent(component_state: Any, name: str) -> Any:
    """The value the browser sent as ``name`` in a component's state (which may itself be anything)."""
    return component_state.get(name) if hasattr(component_state, "get") else None
