"""The KV cache: cached decoding equals full recomputation, and its memory is what the
formula says, measured on the real buffers."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import KVCache, kv_cache_bytes

N_TOKENS = 12  # longer than the sliding window (5), so the ring buffer wraps


def decode_in_chunks(model, ids: torch.Tensor, chunks: list[int]) -> torch.Tensor:
    """Run ids through a fresh cache, ``chunks`` tokens at a time; return all logits (B, T, V)."""
    cache = KVCache(model.config, ids.shape[1], batch=ids.shape[0])
    out, start = [], 0
    for size in chunks:
        out.append(model(ids[:, start:start + size], cache=cache))
        start += size
    assert start == ids.shape[1] == cache.seq_len
    return torch.cat(out, dim=1)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("prompt_len", [1, 4, 8])
def test_prefill_then_token_by_token_equals_full_forward(variant, prompt_len):
    config = tiny_config(**VARIANTS[variant])
    model = random_decoder(config)
    ids = random_ids(config, N_TOKENS, batch=2)
    with torch.inference_mode():
        full = model(ids)
        cached = decode_in_chunks(model, ids, [prompt_len] + [1] * (N_TOKENS - prompt_len))
    assert_close(cached, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["mha", "sliding_window", "alibi", "moe"])
@pytest.mark.parametrize("chunks", [[3, 3, 2, 4], [2, 7, 3]])  # 7 > window: a chunk wraps the ring
def test_chunked_prefill_equals_full_forward(variant, chunks):
    config = tiny_config(**VARIANTS[variant])
    model = random_decoder(config)
    ids = random_ids(config, N_TOKENS)
    with torch.inference_mode():
        full = model(ids)
        cached = decode_in_chunks(model, ids, chunks)
    assert_close(cached, full, rtol=1e-5, atol=1e-5)


def test_ring_buffer_keeps_only_the_window():
    config = tiny_config(**VARIANTS["sliding_window"])
    model = random_decoder(config)
    cache = KVCache(config, N_TOKENS)
    with torch.inference_mode():
        model(random_ids(config, N_TOKENS), cache=cache)
    window = config.sliding_window
    for layer in cache.layers:
        assert layer.capacity == window
        assert sorted(layer.positions.tolist()) == list(range(N_TOKENS - window, N_TOKENS))


FORMULA_CONFIGS = {
    "mha": dict(),
    "gqa": dict(n_kv_heads=2),
    "mqa": dict(n_kv_heads=1),
    "sliding_window_wraps": dict(n_kv_heads=2, sliding_window=5),
    "sliding_window_wider_than_cache": dict(sliding_window=40),
    "explicit_head_dim": dict(n_heads=4, n_kv_heads=2, head_dim=12),
}
DTYPES = {torch.float32: 4, torch.bfloat16: 2, torch.float16: 2}


@pytest.mark.parametrize("name", sorted(FORMULA_CONFIGS))
@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
@pytest.mark.parametrize("tokens,batch", [(1, 1), (17, 1), (30, 3)])
def test_formula_equals_allocated_bytes(name, dtype, tokens, batch):
    config = tiny_config(**FORMULA_CONFIGS[name])
    cache = KVCache(config, tokens, batch=batch, dtype=dtype)
    assert kv_cache_bytes(config, tokens, batch=batch, bytes_per_element=DTYPES[dtype]) == cache.nbytes


@pytest.mark.parametrize("name", ["mha", "gqa", "mqa", "sliding_window_wraps"])
def test_used_bytes_grow_linearly_and_cap_at_the_window(name):
    config = tiny_config(**FORMULA_CONFIGS[name])
    model = random_decoder(config)
    cache = KVCache(config, N_TOKENS)
    # K and V, each (Hkv, D) per token, fp32: what one token adds to one layer
    per_token = 2 * config.n_kv_heads * config.head_dim * 4
    kept_limit = config.sliding_window or N_TOKENS
    assert cache.used_nbytes_per_layer() == [0] * config.n_layers
    with torch.inference_mode():
        for seen, token in enumerate(random_ids(config, N_TOKENS)[0], start=1):
            model(token.reshape(1, 1), cache=cache)
            expected = per_token * min(seen, kept_limit)
            assert cache.used_nbytes_per_layer() == [expected] * config.n_layers
            assert sum(cache.used_nbytes_per_layer()) == kv_cache_bytes(config, seen, bytes_per_element=4)


def test_cache_full_raises():
    config = tiny_config()
    model = random_decoder(config)
    cache = KVCache(config, 4)
    with torch.inference_mode():
        model(random_ids(config, 4), cache=cache)
        with pytest.raises(ValueError, match="KV cache full"):
            model(random_ids(config, 1), cache=cache)
