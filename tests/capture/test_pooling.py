"""Pooling a long causal map (txviz/capture/pooling.py): every cell is the largest visible weight of its
block, bit for bit as a brute-force walk over the cells finds it, whether the map comes whole, band by
band, or as every head of a layer at once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from txviz.capture import pooling


def causal_map(t: int, seed: int = 0, s: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    probs = np.tril(rng.random((t, s or t), dtype=np.float32))
    return probs / probs.sum(axis=1, keepdims=True)


def brute_force_max(probs: np.ndarray, block: int) -> np.ndarray:
    """Every cell visited: the largest finite weight with key ≤ query in the block, else NaN."""
    t, s = probs.shape
    out = np.full((-(-t // block), -(-s // block)), np.nan, dtype=np.float32)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            cells = [probs[q, k] for q in range(i * block, min(t, (i + 1) * block))
                     for k in range(j * block, min(s, (j + 1) * block)) if k <= q and np.isfinite(probs[q, k])]
            if cells:
                out[i, j] = max(cells)
    return out


@pytest.mark.parametrize("t,s,max_cells,block", [(10, 10, 4, 3), (12, 12, 4, 3), (5, 5, 256, 1), (40, 60, 7, 9),
                                                 (60, 40, 7, 9), (300, 300, 256, 2)])
def test_each_cell_is_the_largest_visible_weight_of_its_block(t, s, max_cells, block):
    probs = causal_map(t, seed=t + s, s=s)
    probs[np.triu(np.ones((t, s), dtype=bool), k=1)] = 5.0  # larger than any weight: the future must not win
    probs[3, :2] = -1.0  # a visible weight below zero still counts
    probs[4, 1] = np.nan  # no weight at all: not visible
    pooled, got_block = pooling.pool_attention(probs, max_cells=max_cells)
    expected = brute_force_max(probs, block)
    assert got_block == block and pooled.dtype == np.float32
    assert pooled.tobytes() == expected.tobytes()  # bit for bit, NaN where nothing is visible included


@pytest.mark.parametrize("t,chunk_bands", [(1000, 1), (1000, 3), (777, 64), (40, 2)])
def test_pooling_rows_band_by_band_equals_pooling_the_whole_map(t, chunk_bands):
    probs = causal_map(t, seed=t)
    asked = []

    def rows_of(start, stop):
        asked.append((start, stop))
        return torch.from_numpy(probs[start:stop])  # as a trace rebuilds them

    pooled, block = pooling.pool_attention_rows(rows_of, t, t, chunk_bands=chunk_bands, max_cells=64)
    whole, whole_block = pooling.pool_attention(probs, max_cells=64)
    assert block == whole_block
    assert pooled.tobytes() == whole.tobytes()
    assert asked[0][0] == 0 and asked[-1][1] == t and all(b - a <= block * chunk_bands for a, b in asked)
    assert all(a2 == b1 for (_, b1), (a2, _) in zip(asked, asked[1:]))  # every row once, in order


@pytest.mark.parametrize("n", [300, 1024, 1030])
def test_every_head_of_a_layer_pools_in_one_call_to_the_bits_of_one_map_at_a_time(n):
    rng = np.random.default_rng(n)
    probs = rng.random((2, n, n)).astype(np.float32)
    probs[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = 0.0  # what softmax leaves in the future
    probs[:, 7, :5] = 0.0  # a visible zero
    pooled, block = pooling.pool_maps(torch.from_numpy(probs))
    expected = [pooling.pool_attention(p) for p in probs]
    assert block == expected[0][1] > 1
    assert pooled.numpy().tobytes() == np.stack([e[0] for e in expected]).tobytes()


def test_a_band_starts_on_a_block_boundary():
    with pytest.raises(ValueError, match="block boundary"):
        pooling.pool_band(torch.zeros(4, 8), 4, first_row=2)
