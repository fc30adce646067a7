"""The head maps component's two parts (app/components/head_maps/payload.py): the maps blob round-trips through
float16 with each layer and head's title and colour cap, the view carries a figure with no z whose hover
says the weight is rounded, a pooled layer keeps the builder's title, and the byte budget decides
whether every layer goes in one blob."""

from __future__ import annotations

import numpy as np
import pytest

from app.components.head_maps.payload import (ALL_LAYERS_BYTES, MAX_BLOB_BYTES, layers_to_send, maps_blob, prompt_id,
                                              read_blob, view_data)
from app.figures import big_maps
from txviz.capture.pooling import pool_attention


def causal_maps(n_heads: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n_heads, n, n))
    scores[:, np.triu(np.ones((n, n), dtype=bool), k=1)] = -np.inf
    probs = np.exp(scores - scores.max(axis=2, keepdims=True))
    return probs / probs.sum(axis=2, keepdims=True)


def test_every_cell_round_trips_and_each_head_has_its_title():
    probs = np.stack([causal_maps(3, 12, seed) for seed in (0, 1)])  # 2 layers × 3 heads
    maps = np.where(np.triu(np.ones((12, 12), dtype=bool), k=1), np.nan, probs).astype(np.float16)
    titles = [[f"L{layer} H{h}" for h in range(3)] for layer in (4, 5)]
    blob = maps_blob(maps, 1, prompt="p1", layers=[4, 5], titles=titles, captions=[["a", "b", "c"]] * 2)
    header, back = read_blob(blob)
    np.testing.assert_array_equal(np.isnan(back), np.isnan(maps))
    np.testing.assert_allclose(back[~np.isnan(back)], probs[~np.isnan(maps)], rtol=1e-3)
    assert header["titles"] == titles and header["layers"] == [4, 5] and header["prompt_id"] == "p1"
    assert header["zmax"][1] == pytest.approx([float(np.nanmax(m)) for m in back[1]])
    assert blob != maps_blob(maps[::-1].copy(), 1, prompt="p1", layers=[4, 5], titles=titles,
                             captions=[["a", "b", "c"]] * 2)
    assert len(blob) < maps.nbytes + 1024  # raw float16 and a small header: no base64, no JSON numbers


def test_the_view_has_the_page_head_and_a_figure_with_no_z():
    tokens = [f"t{i}" for i in range(12)]
    view = view_data(tokens, prompt="p1", block=1, cells=12, n_layers=6, n_heads=3, all_layers=True, layer=5,
                     head=1, title="L5 H1")
    trace = view["figure"]["data"][0]
    assert (view["layer"], view["head"], view["n_layers"], view["title_suffix"]) == (5, 1, 6, "")
    assert trace["x"][:2] == ["0:t0", "1:t1"] and trace["z"] is None  # the plain chart's own labels
    assert "weight ≈%{z:.3r}" in trace["hovertemplate"] and "float16" in trace["hovertemplate"]


def test_a_pooled_layer_keeps_the_builders_title_and_its_colour_cap():
    n = 600
    pooled = [pool_attention(p)[0] for p in causal_maps(2, n)]
    block = pool_attention(causal_maps(1, n)[0])[1]
    maps = np.stack(pooled)[None].astype(np.float16)
    header, _ = read_blob(maps_blob(maps, block, prompt="p", layers=[7], titles=[["head 0", "head 1"]],
                                    captions=[["", ""]]))
    view = view_data([str(i) for i in range(n)], prompt="p", block=block, cells=200, n_layers=30, n_heads=2,
                     all_layers=False, layer=7, head=0, title="head 0")
    assert block == 3 and header["shape"] == [1, 2, 200, 200]
    assert view["title_suffix"].startswith(" · each cell = 3×3 tokens")
    assert "≈%{z:.3r}" in view["figure"]["data"][0]["hovertemplate"]
    assert header["zmax"][0] == pytest.approx([big_maps.color_cap(m.astype(np.float32)) for m in maps[0]])


def test_the_byte_budget_decides_which_layers_go():
    assert layers_to_send(30, 9, 64, 64, layer=3) == list(range(30))  # SmolLM2 at 64 tokens: 2.2 MB
    assert 30 * 9 * 64 * 64 * 2 <= ALL_LAYERS_BYTES < 30 * 9 * 96 * 96 * 2
    assert layers_to_send(30, 9, 96, 96, layer=3) == [3]
    with pytest.raises(ValueError, match="budget"):
        maps_blob(np.zeros((1, 40, 300, 300), np.float16), 1, prompt="p", layers=[0], titles=[["t"] * 40],
                  captions=[[""] * 40])
    assert 9 * 256 * 256 * 2 <= MAX_BLOB_BYTES  # one layer of SmolLM2 at its largest drawn size


def test_a_prompt_id_names_what_the_maps_come_from():
    assert prompt_id("m", "a prompt", "sink", False, 64) == prompt_id("m", "a prompt", "sink", False, 64)
    assert prompt_id("m", "a prompt", "sink", False, 64) != prompt_id("m", "a prompt", "sink", True, 64)
