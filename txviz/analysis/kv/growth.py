"""The real KV cache while generating, against its formula: at every step the bytes the
cache held, what 2 × L × H_kv × d_head × T × bytes per element gives for the same T, and how many
tokens each layer held (a sliding-window layer keeps only its window)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from txviz.config import ModelConfig
from txviz.model.kv_cache import kv_cache_bytes


@dataclass(frozen=True)
class CacheGrowth:
    positions: np.ndarray  # (steps,) tokens in the cache when each new token was computed
    measured: np.ndarray  # (steps,) bytes the cache held, all layers
    formula: np.ndarray  # (steps,) kv_cache_bytes at the same number of tokens
    held: np.ndarray  # (steps, layers) tokens each layer held
    last_per_layer: np.ndarray  # (layers,) bytes each layer held after the last step
    capacity: int  # tokens the preallocated cache has room for
    bytes_per_token: int  # all layers: 2 × L × H_kv × d_head × bytes per element

    @property
    def largest_difference(self) -> float:
        """Bytes, over all steps: 0 when the cache holds exactly what the formula says."""
        return float(np.abs(self.measured - self.formula).max())


def cache_growth(steps: Sequence, capacity_bytes: int, config: ModelConfig, element_bytes: int) -> CacheGrowth:
    """``steps``: the generation's steps (``position``, ``cache_bytes``, ``cache_bytes_per_layer``);
    ``capacity_bytes``: what the preallocated cache holds (0 without one: the capacity is then the
    last position + 1)."""
    positions = np.array([s.position for s in steps])
    per_token_layer = 2 * config.n_kv_heads * config.head_dim * element_bytes
    per_layer = np.array([s.cache_bytes_per_layer for s in steps])  # (steps, layers)
    capacity = capacity_tokens(capacity_bytes // per_token_layer, config.layer_windows) or int(positions[-1]) + 1
    return CacheGrowth(
        positions=positions,
        measured=np.array([s.cache_bytes for s in steps], dtype=float),
        formula=np.array([kv_cache_bytes(config, int(p), 1, element_bytes) for p in positions]),
        held=per_layer // per_token_layer,
        last_per_layer=per_layer[-1],
        capacity=capacity,
        bytes_per_token=per_token_layer * config.n_layers)


def capacity_tokens(slots: int, windows: Sequence[int | None]) -> int:
    """Tokens a preallocated cache has room for, given its token slots summed over layers: the T with
    Σ_layers min(T, window) = slots (a sliding-window layer's ring holds at most its window)."""
    def held(tokens: int) -> int:
        return sum(tokens if window is None else min(tokens, window) for window in windows)

    low, high = 0, int(slots)
    while low < high:  # the largest T whose layers fit in the slots
        middle = (low + high + 1) // 2
        low, high = (middle, high) if held(middle) <= slots else (low, middle - 1)
    return low
