"""The KV cache and the formula for its size.

During generation the keys and values of past tokens never change, so they are kept instead of
recomputed: each new token costs O(n) attention instead of O(n²). The price is memory:

    kv_cache_bytes = 2 (K and V) × layers × kv_heads × head_dim × tokens × batch × bytes_per_element

which is why GQA/MQA (fewer kv_heads) matter for long contexts. With a sliding window of W tokens a
layer never needs more than W entries, so ``tokens`` is capped at W on that layer (a ring buffer here);
with mixed layers (``config.layer_types``, Gemma 2/3) only the sliding ones are capped, the full
(global) ones keep every token: the sum runs over layers.
Buffers are preallocated once (gpt-fast's ``KVCache``); ``nbytes`` reads the real tensors and a test
holds it equal to ``kv_cache_bytes``. A call without a cache gets ``NO_CACHE``, which keeps nothing: the
keys are the call's own, so the model runs the same code either way.
"""

from __future__ import annotations

from typing import Sequence

import torch

from txviz.config import ModelConfig


def kv_elements_per_token_layer(n_kv_heads: int, head_dim: int) -> int:
    """Elements one token adds to one layer's cache: a K and a V vector per KV head. The one place
    this rule lives; txviz.analysis.kv.memory builds its sizes (and MLA's alternative) on it."""
    return 2 * n_kv_heads * head_dim


def kv_bytes_per_token(config: ModelConfig, bytes_per_element: float = 2.0) -> float:
    """Bytes one token adds to the cache of a batch of one: 2 × layers × kv_heads × head_dim × bytes."""
    return config.n_layers * kv_elements_per_token_layer(config.n_kv_heads, config.head_dim) * bytes_per_element


def kv_tokens_kept(window: int | None, tokens: int) -> int:
    """Tokens one layer keeps after ``tokens``: all of them, or the last ``window`` on a sliding layer."""
    return tokens if window is None else min(tokens, window)


def kv_cache_bytes(config: ModelConfig, tokens: int, batch: int = 1, bytes_per_element: float = 2.0) -> float:
    """Bytes of the whole cache after ``tokens`` tokens, layer by layer: each sliding layer keeps at most
    its window, each full layer every token."""
    per_layer_token = kv_elements_per_token_layer(config.n_kv_heads, config.head_dim) * bytes_per_element
    kept = sum(kv_tokens_kept(window, tokens) for window in config.layer_windows)
    return per_layer_token * kept * batch


class LayerKVCache:
    """Preallocated K and V of one layer: (B, Hkv, capacity, D) each, plus the position of each slot.

    Without a window the slots are positions 0..capacity−1. With a window W the capacity is W and
    position p lives in slot p mod W (a ring); keys are stored already rotated, so their order
    does not matter to attention, only the mask (built from ``positions``) does.
    """

    def __init__(self, batch: int, n_kv_heads: int, capacity: int, head_dim: int, *,
                 window: int | None, dtype: torch.dtype, device: torch.device | str):
        shape = (batch, n_kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.positions = torch.full((capacity,), -1, dtype=torch.long, device=device)
        self.window = window

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def used_nbytes(self) -> int:
        """Bytes of the slots holding a token (what the formula counts for the tokens seen so far)."""
        filled = int((self.positions >= 0).sum())
        return self.nbytes * filled // self.capacity

    def key_positions(self, start: int, n_new: int) -> torch.Tensor:
        """Positions of the keys ``update`` will return, in the order it returns them."""
        new = torch.arange(start, start + n_new, device=self.positions.device)
        if self.window is None:
            return torch.arange(0, start + n_new, device=self.positions.device)
        kept = self.positions[self.positions >= 0]
        return torch.cat([kept, new])

    def held_nbytes(self, k_all: torch.Tensor, v_all: torch.Tensor) -> int:
        """Bytes of K and V this layer holds: its buffers, whatever ``update`` returned."""
        return self.nbytes

    def update(self, pos: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, Hkv, T, D) of positions pos..pos+T−1; return all keys/values to attend to."""
        n_new = k.shape[2]
        if self.window is None:
            if pos + n_new > self.capacity:
                raise ValueError(f"KV cache full: {pos + n_new} tokens > capacity {self.capacity}")
            self.k[:, :, pos:pos + n_new] = k
            self.v[:, :, pos:pos + n_new] = v
            self.positions[pos:pos + n_new] = torch.arange(pos, pos + n_new, device=self.positions.device)
            return self.k[:, :, :pos + n_new], self.v[:, :, :pos + n_new]
        valid = self.positions >= 0
        k_all = torch.cat([self.k[:, :, valid], k], dim=2)  # (B, Hkv, kept + T, D)
        v_all = torch.cat([self.v[:, :, valid], v], dim=2)
        keep = min(n_new, self.capacity)  # only the last W new tokens can ever be seen again
        new_pos = torch.arange(pos + n_new - keep, pos + n_new, device=self.positions.device)
        slots = new_pos % self.capacity
        self.k[:, :, slots] = k[:, :, n_new - keep:]
        self.v[:, :, slots] = v[:, :, n_new - keep:]
        self.positions[slots] = new_pos
        return k_all, v_all


class KVCache:
    """One LayerKVCache per layer and the number of tokens seen. Pass it to ``Decoder.forward``;
    the model itself keeps no state between calls. ``device`` is one device, or one per layer for a
    model whose layers sit on several (txviz.model.placement.layer_devices): each layer's K and V
    live where that layer computes."""

    def __init__(self, config: ModelConfig, max_tokens: int, *, batch: int = 1,
                 dtype: torch.dtype = torch.float32,
                 device: torch.device | str | Sequence[torch.device | str] = "cpu"):
        devices = [device] * config.n_layers if isinstance(device, (str, torch.device)) else list(device)
        if len(devices) != config.n_layers:
            raise ValueError(f"{len(devices)} devices for a cache of {config.n_layers} layers")
        self.layers = [  # a sliding layer's ring holds its window; a full layer (window None) every token
            LayerKVCache(batch, config.n_kv_heads, kv_tokens_kept(window, max_tokens), config.head_dim,
                         window=window if window and window < max_tokens else None,
                         dtype=dtype, device=layer_device)
            for window, layer_device in zip(config.layer_windows, devices)
        ]
        self.max_tokens = max_tokens
        self.seq_len = 0

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)

    def nbytes_per_layer(self) -> list[int]:
        return [layer.nbytes for layer in self.layers]

    def used_nbytes_per_layer(self) -> list[int]:
        return [layer.used_nbytes() for layer in self.layers]

    def layer(self, index: int) -> LayerKVCache:
        return self.layers[index]

    def key_positions(self, q_pos: torch.Tensor, layer: int = 0) -> torch.Tensor:
        """Positions of the keys the new tokens at ``q_pos`` attend to in ``layer``, cached and new, in
        cache order (the same for every layer of one kind: full, or sliding with one window)."""
        return self.layers[layer].key_positions(self.seq_len, len(q_pos)).to(q_pos.device)

    def advance(self, n_new: int) -> None:
        self.seq_len += n_new


class NoLayerCache:
    """One layer without a cache: attends over the call's own keys and values, keeps nothing."""

    def update(self, pos: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return k, v

    def held_nbytes(self, k_all: torch.Tensor, v_all: torch.Tensor) -> int:
        return k_all.nbytes + v_all.nbytes


class NoCache:
    """The cache of a call without one: every call starts at position 0 and its keys are its queries.
    Stateless, so one instance serves every call."""

    seq_len = 0

    def layer(self, index: int) -> NoLayerCache:
        return NO_LAYER_CACHE

    def key_positions(self, q_pos: torch.Tensor, layer: int = 0) -> torch.Tensor:
        return q_pos

    def advance(self, n_new: int) -> None:
        pass


NO_LAYER_CACHE = NoLayerCache()
NO_CACHE = NoCache()
