"""The blockwise path's cheaper arithmetic gives the same numbers as the plain formulas it replaced:
row summaries written straight into the layer's rows, the causal mask added rather than filled, RoPE
written head-major, and blocks sized per torch thread."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import txviz.model.attention as attention
from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.capture.summaries import METRICS, TokenPatterns, row_metrics
from txviz.model.attention import AttentionContext
from txviz.model.positions import apply_rotary, rotate_half

EXACT = dict(rtol=0, atol=0, equal_nan=True)


def reference_row_metrics(probs, scores, block) -> torch.Tensor:
    """The per-row formulas as separate tensors stacked at the end, NaN filled where undefined."""
    b, h, n, k = probs.shape
    p_max = probs.amax(dim=-1)
    entropy = scores.amax(dim=-1) - p_max.log() - (scores * probs).sum(dim=-1)
    first = probs[..., 0] if block.first_key_is_token_0 else probs.new_zeros(b, h, n)
    prev = probs.gather(-1, block.prev_index.expand(b, h, n)[..., None])[..., 0]
    if block.prev_unreachable is not None:
        prev = torch.where(block.prev_unreachable, 0.0, prev)
    duplicate, induction = probs.new_zeros(b, h, n), probs.new_zeros(b, h, n)
    block.masses(probs, duplicate, induction)
    values = torch.stack([entropy, first, prev, duplicate, induction, p_max], dim=-1)
    return values.masked_fill(block.undefined.isnan(), float("nan"))


@pytest.mark.parametrize("keys_start", [0, 3])
def test_row_metrics_in_place_equal_the_stacked_formulas_bit_for_bit(keys_start):
    torch.manual_seed(0)
    ids = torch.randint(0, 5, (2, 40))  # dense duplicate/induction patterns
    rows, keys = slice(8, 24), slice(keys_start, 24)
    block = TokenPatterns(ids).block(rows, keys)
    scores = torch.randn(2, 3, 16, 24 - keys_start) * 4
    probs = torch.softmax(scores, dim=-1)
    expected = reference_row_metrics(probs, scores.clone(), block)
    layer_rows = torch.full((2, 3, 40, len(METRICS)), -1.0)
    row_metrics(probs, scores.clone(), block, out=layer_rows[:, :, rows])
    assert_close(layer_rows[:, :, rows], expected, **EXACT)
    assert (layer_rows[:, :, :8] == -1).all() and (layer_rows[:, :, 24:] == -1).all()  # no other row touched
    assert_close(row_metrics(probs, scores.clone(), block), expected, **EXACT)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_causal_mask_added_equals_the_lowest_number_filled_in(dtype):
    positions = torch.arange(50)
    ctx = AttentionContext(random_decoder(tiny_config()).positions, positions, positions, None, dtype)
    rows, keys = slice(20, 50), slice(0, 50)
    scores = (torch.randn(2, 3, 30, 50) * 30).to(dtype)
    future = torch.ones(30, 30, dtype=torch.bool).triu(1)
    expected = scores.clone()
    expected[..., 20:] = expected[..., 20:].masked_fill(future, torch.finfo(dtype).min)
    assert_close(ctx.mask_block_(scores, rows, keys), expected, **EXACT)


def test_rope_is_written_head_major_with_the_same_numbers():
    torch.manual_seed(0)
    x = torch.randn(2, 30, 4, 16).transpose(1, 2)  # (B, H, T, D) as a projection's transposed view
    cos, sin = torch.randn(30, 16), torch.randn(30, 16)
    rotated = apply_rotary(x, cos, sin)
    assert rotated.is_contiguous()
    assert_close(rotated, x * cos + rotate_half(x) * sin, **EXACT)
    with torch.enable_grad():  # a live recorder's gradients still flow
        leaf = x.detach().clone().requires_grad_(True)
        apply_rotary(leaf, cos, sin).sum().backward()
    assert leaf.grad is not None


def blocks_with(threads: int, monkeypatch) -> list[slice]:
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    positions = torch.arange(60)
    ctx = AttentionContext(random_decoder(tiny_config()).positions, positions, positions, None, torch.float32)
    return ctx.row_blocks(60, batch_heads=4)


@pytest.mark.parametrize("threads", [2, 3])
def test_blocks_are_sized_per_thread(threads, monkeypatch):
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 300)
    monkeypatch.setattr(attention, "MIN_BLOCK_ROWS", 2)
    one, several = blocks_with(1, monkeypatch), blocks_with(threads, monkeypatch)
    assert [r for block in several for r in range(block.start, block.stop)] == list(range(60))
    for block in several:  # causal, no cache: a block's keys are 0..its last row
        n = block.stop - block.start
        assert n >= 2 * threads or block.stop == 60
        assert n == 2 * threads or 4 * n * block.stop <= 300 * threads
    assert len(several) < len(one)


def test_blocks_grow_with_threads_only_up_to_a_bound(monkeypatch):
    bounded = blocks_with(attention.MAX_BLOCK_THREADS, monkeypatch)
    assert blocks_with(4 * attention.MAX_BLOCK_THREADS, monkeypatch) == bounded


@pytest.mark.parametrize("variant", ["gqa", "sliding_window", "alibi"])
def test_summaries_and_logits_with_two_threads_equal_one_thread_s(variant, monkeypatch):
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 64)
    monkeypatch.setattr(attention, "MIN_BLOCK_ROWS", 3)
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, 40)
    one = trace(model, ids, capture=("head_summaries", "logits"))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        two = trace(model, ids, capture=("head_summaries", "logits"))
    finally:
        torch.set_num_threads(threads)
    # two threads share the blocks out to two workers of one thread each (txviz.model.block_workers), each
    # block sized for one thread: the same blocks as one thread's, so the same numbers, bit for bit
    assert_close(two["head_summaries"], one["head_summaries"], **EXACT)
    assert_close(two["logits"], one["logits"], **EXACT)


@pytest.mark.parametrize("variant", ["gqa", "no_positions"])
def test_rotated_queries_and_keys_are_computed_in_their_kept_slots(variant, monkeypatch):
    import importlib

    trace_module = importlib.import_module("txviz.capture.trace")
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, 20)
    kept_in_place = []
    is_view_of = trace_module._is_view_of
    monkeypatch.setattr(trace_module, "_is_view_of", lambda t, slot: kept_in_place.append(is_view_of(t, slot)) or kept_in_place[-1])
    captured = trace(model, ids, capture=("q", "k", "q_rot", "k_rot"))
    # RoPE writes q_rot and k_rot straight into their slots; without RoPE they are q and k, copied
    rotated = variant != "no_positions"
    assert sum(kept_in_place) == (2 * config.n_layers if rotated else 0)
    positions = torch.arange(20)
    ctx = AttentionContext(model.positions, positions, positions, None, torch.float32)
    for name, source in (("q_rot", "q"), ("k_rot", "k")):
        assert_close(captured[name], torch.stack([ctx.rotate(q) for q in captured[source]]), **EXACT)
