"""Big-map chart builders: a long prompt's map is drawn pooled to at most 256×256 cells (the pooling
itself: tests/capture/test_pooling.py) or cut to a region."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.figures import big_maps


def causal_map(t: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    probs = np.tril(rng.random((t, t), dtype=np.float32))
    return probs / probs.sum(axis=1, keepdims=True)


def test_overview_of_a_4096_map_sends_at_most_256_squared_cells():
    probs = causal_map(4096)
    fig = big_maps.attention_overview(probs, title="L3 H2")
    heat = fig.data[0]
    z = np.asarray(heat.z)
    assert z.shape == (256, 256)
    assert "16×16 tokens" in fig.layout.title.text and "16×16 tokens" in heat.hovertemplate
    assert list(heat.x[:3]) == [0, 16, 32]
    assert np.isnan(z[0, 1]) and z[1, 0] == pytest.approx(probs[16:32, :16].max())
    assert len(json.dumps(fig.to_plotly_json(), default=str)) < 2_000_000  # not 16M cells


def test_region_keeps_full_resolution_and_absolute_positions():
    probs = causal_map(300)
    tokens = [f"t{i}" for i in range(300)]
    fig = big_maps.attention_region(probs[200:210, 195:215], tokens[200:210], tokens[195:215], q_offset=200, k_offset=195)
    heat = fig.data[0]
    z = np.asarray(heat.z, dtype=float)
    assert z.shape == (10, 20)
    assert list(heat.y[:2]) == ["200:t200", "201:t201"] and heat.x[0] == "195:t195"
    assert z[0, 5] == pytest.approx(probs[200, 200]) and np.isnan(z[0, 6])  # key 201 is after query 200
    assert "queries 200–209 × keys 195–214" in fig.layout.title.text
    with pytest.raises(ValueError, match="over 256×256"):
        big_maps.attention_region(probs[:, :10], tokens, tokens[:10], q_offset=0, k_offset=0)


def test_overview_colour_saturates_at_the_99th_percentile_so_a_sink_does_not_wash_it_out():
    probs = causal_map(1024) * 0.1
    probs[:, 0] = 1.0  # an attention sink: one column near 1
    fig = big_maps.attention_overview(probs)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert fig.data[0].zmax == pytest.approx(np.nanpercentile(z, 99))
    assert fig.data[0].zmax < 0.5 and np.nanmax(z) == 1.0  # the sink is still there, at the top of the scale


def test_the_overview_draws_the_pooled_cells_bit_for_bit():
    from txviz.capture.pooling import pool_attention

    probs = causal_map(700, seed=3)
    z = np.asarray(big_maps.attention_overview(probs).data[0].z)
    assert z.tobytes() == pool_attention(probs)[0].tobytes()
