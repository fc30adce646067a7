"""The real KVCache filled over a long generation (txviz.analysis.kv.long): bytes read back from the
buffers equal the formula at every chunk; a Gemma-3-like model's sliding layers stop at the window
while its global layers and every layer of a model without windows keep growing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.tiny import tiny_config
from txviz.analysis.kv.long import measure_long_cache
from txviz.model.kv_cache import kv_cache_bytes

TWO_KINDS = dict(n_layers=6, n_kv_heads=1, head_dim=16, sliding_window=12,
                 layer_types=("sliding",) * 5 + ("full",), rope_local_theta=10.0)


@pytest.mark.parametrize("overrides", [{}, TWO_KINDS])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_buffers_equal_the_formula_at_every_chunk(overrides, dtype):
    config = tiny_config(**overrides)
    run = measure_long_cache(config, 50, chunk=7, dtype=dtype)
    assert run.tokens.tolist() == [7, 14, 21, 28, 35, 42, 49, 50]
    element = 4 if dtype == torch.float32 else 2
    assert run.measured.tolist() == [kv_cache_bytes(config, t, 1, element) for t in run.tokens]
    assert run.largest_difference == 0


def test_sliding_layers_stop_at_the_window_and_global_ones_grow():
    config = tiny_config(**TWO_KINDS)
    run = measure_long_cache(config, 40, chunk=4)
    np.testing.assert_array_equal(run.held[:, 0], np.minimum(run.tokens, 12))
    np.testing.assert_array_equal(run.held[:, 5], run.tokens)
    per_token_layer = 2 * 1 * 16 * 4
    assert run.added_per_token(4, 12) == 6 * per_token_layer
    assert run.added_per_token(12, 40) == 1 * per_token_layer  # past the window only the global layer grows
    assert run.allocated == (5 * 12 + 40) * per_token_layer


def test_refuses_empty_runs():
    with pytest.raises(ValueError):
        measure_long_cache(tiny_config(), 0)


def test_capacity_in_tokens_counts_a_window_layer_at_most_its_window():
    from txviz.analysis.kv.growth import capacity_tokens

    gemma_like = (8, 8, None)  # two local layers of window 8, one global
    assert capacity_tokens(3 * 5, gemma_like) == 5  # under the window every layer holds every token
    assert capacity_tokens(8 + 8 + 20, gemma_like) == 20  # past it only the global layer grows
    assert capacity_tokens(8 + 8 + 21, gemma_like) == 21  # one more slot: one more token, on the global layer
    assert capacity_tokens(3 * 5 - 1, gemma_like) == 4  # under the window a token needs a slot in every layer
    assert capacity_tokens(3 * 7, (None, None, None)) == 7
    assert capacity_tokens(0, gemma_like) == 0
