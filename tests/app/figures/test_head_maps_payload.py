"""The head maps component's payload (app/figures/head_maps.py): the maps round-trip through float16
and base64, each layer and head gets its own title and colour cap, a pooled layer keeps the builder's
title, and the byte budget decides whether every layer is sent."""

from __future__ import annotations

import numpy as np
import pytest

from app.figures import big_maps
from app.figures.head_maps import (ALL_LAYERS_BYTES, MAX_PAYLOAD_BYTES, decode_maps, head_maps_payload, layers_to_send,
                                   maps_data)


def causal_maps(n_heads: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n_heads, n, n))
    scores[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = -np.inf
    probs = np.exp(scores - scores.max(axis=2, keepdims=True))
    return probs / probs.sum(axis=2, keepdims=True)


def test_every_cell_round_trips_and_each_head_has_its_title():
    probs = np.stack([causal_maps(3, 12, seed) for seed in (0, 1)])  # 2 layers × 3 heads
    maps = np.where(np.triu(np.ones((12, 12), dtype=bool), k=1), np.nan, probs).astype(np.float16)
    tokens = [f"t{i}" for i in range(12)]
    titles = [[f"L{layer} H{h}" for h in range(3)] for layer in (4, 5)]
    data = maps_data(maps, 1, layers=[4, 5], titles=titles, captions=[["a", "b", "c"]] * 2)
    payload = head_maps_payload(data, tokens, layer=5, head=1)
    back = decode_maps(payload["maps"], payload["shape"])
    np.testing.assert_array_equal(np.isnan(back), np.isnan(maps))
    np.testing.assert_allclose(back[~np.isnan(back)], probs[~np.isnan(maps)], rtol=1e-3)
    assert payload["titles"] == titles and (payload["layer"], payload["head"]) == (5, 1)
    assert payload["zmax"][1] == pytest.approx([float(np.nanmax(m)) for m in back[1]])
    assert payload["figure"]["data"][0]["x"][:2] == ["0:t0", "1:t1"]  # the plain chart's own labels
    assert payload["figure"]["data"][0]["z"] is None
    assert data["maps_id"] != maps_data(maps[::-1].copy(), 1, layers=[4, 5], titles=titles,
                                        captions=[["a", "b", "c"]] * 2)["maps_id"]


def test_a_pooled_layer_keeps_the_builders_title_and_its_colour_cap():
    n = 600
    pooled = [big_maps.pool_attention(p)[0] for p in causal_maps(2, n)]
    block = big_maps.pool_attention(causal_maps(1, n)[0])[1]
    maps = np.stack(pooled)[None].astype(np.float16)
    data = maps_data(maps, block, layers=[7], titles=[["head 0", "head 1"]], captions=[["", ""]])
    payload = head_maps_payload(data, [str(i) for i in range(n)], layer=7, head=0)
    assert block == 3 and payload["shape"] == [1, 2, 200, 200]
    assert payload["titles"][0][1].startswith("head 1 · each cell = 3×3 tokens")
    assert payload["zmax"][0] == pytest.approx([big_maps.color_cap(m.astype(np.float32)) for m in maps[0]])
    assert len(payload["maps"]) < MAX_PAYLOAD_BYTES


def test_the_byte_budget_decides_which_layers_go():
    assert layers_to_send(30, 9, 64, 64, layer=3) == list(range(30))  # SmolLM2 at 64 tokens: 2.2 MB
    assert 30 * 9 * 64 * 64 * 2 <= ALL_LAYERS_BYTES < 30 * 9 * 96 * 96 * 2
    assert layers_to_send(30, 9, 96, 96, layer=3) == [3]
    with pytest.raises(ValueError, match="budget"):
        maps_data(np.zeros((1, 40, 300, 300), np.float16), 1, layers=[0], titles=[["t"] * 40], captions=[[""] * 40])
