"""The real KV cache over a long generation, for models side by side: a KVCache of
the model's own shape is filled chunk by chunk through ``update`` (the path decoding takes, keys and
values of the right shape; their values do not change a buffer's size), and after every chunk the bytes
its buffers hold and the tokens each layer keeps are read back, beside ``kv_cache_bytes``' formula.

On Gemma 3 the sliding layers' rings stop at their window (512) while the global layers keep growing;
on SmolLM2 every layer grows by one token per token. No weights are needed, only the config.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from txviz.config import ModelConfig
from txviz.model.kv_cache import KVCache, kv_cache_bytes, kv_elements_per_token_layer


@dataclass(frozen=True)
class LongCache:
    tokens: np.ndarray  # (steps,) tokens seen after each chunk
    measured: np.ndarray  # (steps,) bytes the buffers hold in filled slots, all layers
    formula: np.ndarray  # (steps,) kv_cache_bytes at the same number of tokens
    held: np.ndarray  # (steps, layers) tokens each layer keeps
    allocated: int  # bytes the preallocated buffers take for the whole run
    bytes_per_token_layer: int  # one token in one layer: 2 × H_kv × d_head × bytes per element

    @property
    def largest_difference(self) -> float:
        return float(np.abs(self.measured - self.formula).max())

    def added_per_token(self, start: int, stop: int) -> float:
        """Measured bytes the cache grew by per token between ``start`` and ``stop`` tokens: the chunk
        ends at or after each (the empty cache counts as a point at 0 tokens)."""
        tokens, measured = np.concatenate([[0], self.tokens]), np.concatenate([[0.0], self.measured])
        i = min(int(np.searchsorted(tokens, start)), len(tokens) - 2)
        j = max(int(np.searchsorted(tokens, stop)), i + 1)
        return float((measured[j] - measured[i]) / (tokens[j] - tokens[i]))


def measure_long_cache(config: ModelConfig, n_tokens: int, *, chunk: int = 64,
                       dtype: torch.dtype = torch.float32) -> LongCache:
    """Fill a KVCache of ``config``'s shape with ``n_tokens`` tokens, ``chunk`` at a time (the first chunk
    a prompt, the rest as a chunked decode), reading the buffers back after each chunk."""
    if n_tokens < 1 or chunk < 1:
        raise ValueError("n_tokens and chunk must be at least 1")
    cache = KVCache(config, n_tokens, dtype=dtype)
    element = torch.tensor([], dtype=dtype).element_size()
    per_token_layer = kv_elements_per_token_layer(config.n_kv_heads, config.head_dim) * element
    tokens, measured, held = [], [], []
    for start in range(0, n_tokens, chunk):
        n_new = min(chunk, n_tokens - start)
        kv = torch.zeros(1, config.n_kv_heads, n_new, config.head_dim, dtype=dtype)
        for layer in cache.layers:
            layer.update(start, kv, kv)
        cache.advance(n_new)
        used = cache.used_nbytes_per_layer()
        tokens.append(cache.seq_len)
        measured.append(sum(used))
        held.append([u // per_token_layer for u in used])
    return LongCache(tokens=np.array(tokens), measured=np.array(measured, dtype=float),
                     formula=np.array([kv_cache_bytes(config, t, 1, element) for t in tokens], dtype=float),
                     held=np.array(held), allocated=cache.nbytes, bytes_per_token_layer=per_token_layer)
