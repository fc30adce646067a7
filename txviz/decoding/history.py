"""Keys and values kept for branching: a new continuation from an earlier step reuses the cache of
every token before it instead of running them again.

A layer without a window keeps every token in its cache slot by position, so the first n slots
are the first n tokens for as long as the cache lives. A sliding layer keeps only its last W tokens
in a ring and overwrites older ones as generation goes on, so a prefix ending earlier cannot be read
back from it: for those layers the run also keeps each new token's rotated key and value here (the
recorder is offered them anyway; keeping them is a reference per step, no copy). ``cache_for_prefix``
builds the cache of the first n tokens from both, through the cache's own ``update``, so the ring
gets exactly the slots a run over those n tokens would have filled.
"""

from __future__ import annotations

from typing import Iterable

import torch

from txviz.model import KVCache
from txviz.model.placement import layer_devices


class KVHistory:
    """Rotated K and V (B, Hkv, n, D) of every position so far, on the layers named (positions from 0)."""

    def __init__(self, layers: Iterable[int]):
        self._chunks: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {i: [] for i in layers}

    @classmethod
    def for_windows(cls, config) -> "KVHistory":
        """A history of the layers with a sliding window (those whose cache may be a ring)."""
        return cls(i for i, window in enumerate(config.layer_windows) if window is not None)

    @property
    def layers(self) -> frozenset[int]:
        return frozenset(self._chunks)

    def add(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        self._chunks[layer].append((k, v))

    def prefix(self, layer: int, n_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V (B, Hkv, n_tokens, D) of positions 0..n_tokens − 1."""
        chunks = self._chunks[layer]
        k = torch.cat([k for k, _ in chunks], dim=2)[:, :, :n_tokens]
        v = torch.cat([v for _, v in chunks], dim=2)[:, :, :n_tokens]
        if k.shape[2] < n_tokens:
            raise ValueError(f"the history holds {k.shape[2]} tokens, not {n_tokens}")
        return k, v

    def truncated(self, n_tokens: int) -> "KVHistory":
        """A new history holding positions 0..n_tokens − 1 (a branch's, which then grows on its own)."""
        history = KVHistory(self._chunks)
        for layer in self._chunks:
            history.add(layer, *self.prefix(layer, n_tokens))
        return history


def cache_for_prefix(model, source: KVCache, history: KVHistory, n_tokens: int, capacity: int) -> KVCache:
    """A fresh cache of ``capacity`` tokens holding the first ``n_tokens`` of a run whose cache is
    ``source`` and whose windowed layers' keys and values are in ``history``."""
    if n_tokens > source.seq_len:
        raise ValueError(f"the run's cache holds {source.seq_len} tokens, not {n_tokens}")
    cache = KVCache(model.config, capacity, dtype=source.layers[0].k.dtype, device=layer_devices(model))
    for i, layer in enumerate(cache.layers):
        if i in history.layers:
            k, v = history.prefix(i, n_tokens)
        else:  # a full layer: slot p holds position p
            k, v = source.layer(i).k[:, :, :n_tokens], source.layer(i).v[:, :, :n_tokens]
        layer.update(0, k, v)
    cache.advance(n_tokens)
    return cache
