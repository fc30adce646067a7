"""The head maps component's payload (app/figures/head_maps.py): the maps round-trip through float16
and base64, each head gets its own title and colour cap, a pooled layer keeps the builder's title."""

from __future__ import annotations

import numpy as np
import pytest

from app.figures import big_maps
from app.figures.head_maps import MAX_PAYLOAD_BYTES, decode_maps, head_maps_payload


def causal_maps(n_heads: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n_heads, n, n))
    scores[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = -np.inf
    probs = np.exp(scores - scores.max(axis=2, keepdims=True))
    return probs / probs.sum(axis=2, keepdims=True)


def test_every_cell_round_trips_and_each_head_has_its_title():
    probs = causal_maps(3, 12)
    maps = np.where(np.triu(np.ones((12, 12), dtype=bool), k=1), np.nan, probs).astype(np.float16)
    tokens = [f"t{i}" for i in range(12)]
    payload = head_maps_payload(maps, 1, tokens, layer=4, head=1, titles=[f"L4 H{h}" for h in range(3)],
                                captions=["a", "b", "c"])
    back = decode_maps(payload["maps"], payload["shape"])
    np.testing.assert_array_equal(np.isnan(back), np.isnan(maps))
    np.testing.assert_allclose(back[~np.isnan(back)], probs[~np.isnan(maps)], rtol=1e-3)
    assert payload["titles"] == ["L4 H0", "L4 H1", "L4 H2"]
    assert payload["zmax"] == pytest.approx([float(np.nanmax(m)) for m in back])
    assert payload["figure"]["data"][0]["x"][:2] == ["0:t0", "1:t1"]  # the plain chart's own labels
    assert payload["maps_id"] != head_maps_payload(maps[::-1].copy(), 1, tokens, layer=4, head=1,
                                                   titles=payload["titles"], captions=["a", "b", "c"])["maps_id"]


def test_a_pooled_layer_keeps_the_builders_title_and_its_colour_cap():
    n = 600
    pooled = [big_maps.pool_attention(p)[0] for p in causal_maps(2, n)]
    block = big_maps.pool_attention(causal_maps(1, n)[0])[1]
    maps = np.stack(pooled).astype(np.float16)
    payload = head_maps_payload(maps, block, [str(i) for i in range(n)], layer=0, head=0,
                                titles=["head 0", "head 1"], captions=["", ""])
    assert block == 3 and payload["shape"] == [2, 200, 200]
    assert payload["titles"][1].startswith("head 1 · each cell = 3×3 tokens")
    assert payload["zmax"] == pytest.approx([big_maps.color_cap(m.astype(np.float32)) for m in maps])
    assert len(payload["maps"]) < MAX_PAYLOAD_BYTES


def test_maps_over_the_budget_are_refused():
    with pytest.raises(ValueError, match="budget"):
        head_maps_payload(np.zeros((40, 300, 300), np.float16), 1, ["x"] * 300, layer=0, head=0,
                          titles=["t"] * 40, captions=[""] * 40)
