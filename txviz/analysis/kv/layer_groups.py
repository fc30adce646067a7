"""Layers that keep the same thing, grouped, in the calculator's terms: a model's layers differ in what they
cache (every token, the last ``window`` of a sliding window, at most one chunk of chunked attention, or,
for linear-attention and state-space layers, no K/V at all but a fixed state per sequence), and some apply
no positions. The memory functions (txviz.analysis.kv.memory) sum over these groups; the report
(txviz.analysis.kv.report) and the pages describe each one ("26 sliding layers stop at 4 KiB/token past
512; 8 global layers grow").
"""

from __future__ import annotations

from dataclasses import dataclass

from txviz.geometry.geometry import CHUNKED, FULL, NO_KV_TYPES, SLIDING

WORDS = {FULL: "global", SLIDING: "sliding", CHUNKED: "chunked", "linear_attention": "linear-attention",
         "mamba": "Mamba"}


@dataclass(frozen=True)
class LayerGroup:
    """``layers`` layers of type ``kind`` (txviz.geometry.geometry.LAYER_TYPES), each keeping K and V of the last
    ``window`` tokens (None: all) or, where ``kind`` keeps none, ``state_elements`` per sequence;
    ``positionless`` of them apply no positions."""

    kind: str
    layers: int
    window: int | None = None
    state_elements: int = 0
    positionless: int = 0

    def __post_init__(self) -> None:
        if self.kind not in WORDS or self.layers < 1 or self.state_elements < 0 or \
                not 0 <= self.positionless <= self.layers or (self.window is not None and self.window < 1):
            raise ValueError(f"not a layer group: {self}")

    @property
    def caches_kv(self) -> bool:
        return self.kind not in NO_KV_TYPES

    @property
    def grows(self) -> bool:
        """Whether the cache of these layers grows with every token."""
        return self.caches_kv and self.window is None

    def kept(self, tokens: int) -> int:
        """Tokens each of these layers keeps K and V for, at ``tokens`` tokens."""
        return 0 if not self.caches_kv else min(tokens, self.window or tokens)

    @property
    def label(self) -> str:
        named = f"{self.layers} {WORDS[self.kind]} layer{'s' * (self.layers != 1)}"
        if self.positionless:
            named += " without positions" if self.positionless == self.layers else \
                f" ({self.positionless} without positions)"
        return named


def groups_of_windows(n_layers: int, window: int | None, window_layers: int) -> tuple[LayerGroup, ...]:
    """Sliding layers first, then global ones: a model described by one window and how many layers keep it."""
    windowed = window_layers if window else 0
    groups = [LayerGroup(SLIDING, windowed, window)] if windowed else []
    return tuple(groups + ([LayerGroup(FULL, n_layers - windowed)] if n_layers > windowed else []))


def groups_of_geometry(geometry) -> tuple[LayerGroup, ...]:
    """A config's layers (txviz.geometry.Geometry) grouped by type, window and state, in order of first appearance."""
    counts: dict[tuple, list[int]] = {}
    positionless = set(geometry.positionless)
    for layer, key in enumerate(zip(geometry.layer_types, geometry.windows, geometry.state_elements)):
        count = counts.setdefault(key, [0, 0])
        count[0] += 1
        count[1] += layer in positionless
    return tuple(LayerGroup(kind, layers, window, state, nope)
                 for (kind, window, state), (layers, nope) in counts.items())
