"""Summaries mode: per-head metrics computed block by block during the pass equal analysis.heads on the
full eager maps; the blockwise path's logits equal the eager path's and the fused kernel's; any map
rebuilt from q_rot/k_rot equals the eager map; compact map storage round-trips."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import txviz.model.attention as attention
from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import CaptureError, trace
from txviz.analysis.heads.metrics import METRICS as HEAD_METRICS
from txviz.analysis.heads.metrics import head_metrics
from txviz.capture.summaries import METRICS, head_metrics as summary_metrics
from txviz.capture import maps, summaries
from txviz.capture.summaries import TokenPatterns
from txviz.capture.maps import MapStorage, rebuild_attention
from txviz.model.attention import AttentionContext
from txviz.capture.trace import SUMMARY_CAPTURE, Recorder

ATTENTION_VARIANTS = ["mha", "gqa", "mqa", "sliding_window", "alibi", "learned", "no_positions", "yarn"]
N_TOKENS = 40  # > the sliding window (5) and several blocks when blocks are small


@pytest.fixture(params=["one_block", "many_blocks"])
def block_size(request, monkeypatch):
    """Default blocks (a tiny model's whole map is one block) and 3-row blocks (many, ragged)."""
    if request.param == "many_blocks":
        monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 1)
        monkeypatch.setattr(attention, "MIN_BLOCK_ROWS", 3)
    return request.param


def repetitive_ids(config, n_tokens: int, seed: int = 0, batch: int = 1) -> torch.Tensor:
    """Random ids from a small alphabet, then repeated: duplicate and induction patterns are dense."""
    half = random_ids(tiny_config(vocab_size=11), n_tokens // 2, seed=seed, batch=batch) % config.vocab_size
    return torch.cat([half, half], dim=1)


def assert_metrics_close(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for name in expected:
        assert_close(got[name], expected[name], rtol=1e-5, atol=1e-5, equal_nan=True, msg=name)


def test_metric_names_and_order_are_those_of_analysis_heads():
    assert METRICS == HEAD_METRICS


@pytest.mark.parametrize("variant", ATTENTION_VARIANTS)
@pytest.mark.parametrize("make_ids", [random_ids, repetitive_ids], ids=["random", "repetitive"])
def test_summaries_equal_head_metrics_of_full_eager_maps(variant, make_ids, block_size):
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), make_ids(config, N_TOKENS)
    expected = head_metrics(trace(model, ids, capture="attn_probs")["attn_probs"][:, 0], ids[0])
    summaries = trace(model, ids, capture="head_summaries")
    assert summaries["head_summaries"].shape == (config.n_layers, 1, config.n_heads, N_TOKENS, len(METRICS))
    assert_metrics_close(summaries.head_metrics(), expected)


@pytest.mark.parametrize("variant", ATTENTION_VARIANTS)
def test_blockwise_logits_equal_eager_and_fused(variant, block_size):
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, N_TOKENS, batch=2)
    with torch.inference_mode():
        fused = model(ids)
    eager = trace(model, ids, capture=("attn_probs", "logits"))["logits"]
    blockwise = trace(model, ids, capture=("head_summaries", "logits"))["logits"]
    assert_close(blockwise, eager, rtol=1e-5, atol=1e-5)
    assert_close(blockwise, fused, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bytes_per_pair", [0, 1 << 30], ids=["pairs", "masks"])
def test_duplicate_and_induction_masses_from_pairs_or_masks(bytes_per_pair, block_size, monkeypatch):
    """Each block keeps its equal-token pairs as indices or, where those would take more memory, as
    dense masks: both give the masses of the full eager maps, in a batch whose sequences differ."""
    monkeypatch.setattr(summaries, "SPARSE_BYTES_PER_PAIR", bytes_per_pair)
    config = tiny_config(**VARIANTS["gqa"])
    model, ids = random_decoder(config), repetitive_ids(config, N_TOKENS, batch=2)
    probs = trace(model, ids, capture="attn_probs")["attn_probs"]
    got = trace(model, ids, capture="head_summaries")
    block = TokenPatterns(ids).block(slice(0, N_TOKENS), slice(0, N_TOKENS))
    assert all((pair[0].dtype == torch.bool) == bool(bytes_per_pair) for pair in block.pairs)
    for b in range(2):
        assert_metrics_close(got.head_metrics(batch=b), head_metrics(probs[:, b], ids[b]))


def test_summaries_of_each_sequence_in_a_batch():
    config = tiny_config(**VARIANTS["gqa"])
    model, ids = random_decoder(config), repetitive_ids(config, 24, batch=3)
    probs = trace(model, ids, capture="attn_probs")["attn_probs"]
    summaries = trace(model, ids, capture="head_summaries")
    for b in range(3):
        assert_metrics_close(summaries.head_metrics(batch=b), head_metrics(probs[:, b], ids[b]))


def test_summaries_ride_along_the_eager_path():
    config = tiny_config(**VARIANTS["alibi"])
    model, ids = random_decoder(config), repetitive_ids(config, 20)
    both = trace(model, ids, capture=("attn_scores", "attn_probs", "head_summaries"))
    assert_metrics_close(both.head_metrics(), head_metrics(both["attn_probs"][:, 0], ids[0]))
    assert torch.isinf(both["attn_scores"]).any()  # the captured scores keep −∞ where masked


def test_summaries_for_chosen_layers_only():
    config = tiny_config(n_layers=4, n_kv_heads=2)
    model, ids = random_decoder(config), repetitive_ids(config, 16)
    full, subset = trace(model, ids, capture="head_summaries"), trace(model, ids, capture="head_summaries", layers=[3, 1])
    assert subset.layers == (1, 3)
    assert_close(subset["head_summaries"], full["head_summaries"][[1, 3]], rtol=1e-5, atol=1e-6, equal_nan=True)


def test_per_row_values_are_nan_exactly_where_undefined():
    config = tiny_config()
    ids = torch.tensor([[5, 6, 5, 7, 6, 5]])
    rows = trace(random_decoder(config), ids, capture="head_summaries")["head_summaries"][0, 0, 0]  # (T, M)
    assert rows[0].isnan().all()  # row 0 only sees itself
    assert not rows[1:, [METRICS.index(m) for m in ("entropy", "first_token_mass", "prev_token", "max_weight")]].isnan().any()
    assert rows[:, METRICS.index("duplicate_token")].isnan().tolist() == [True, True, False, True, False, False]
    assert rows[:, METRICS.index("induction")].isnan().tolist() == [True, True, False, True, False, False]
    assert summary_metrics(rows[:1]) == pytest.approx({m: float("nan") for m in METRICS}, nan_ok=True)


def test_head_summaries_need_the_token_ids():
    with pytest.raises(CaptureError, match="needs the token ids"):
        Recorder(("head_summaries",), None, 2)


# ---- blocks ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("window", [None, 5])
@pytest.mark.parametrize("budget", [1, 300, 1 << 21])
def test_blocks_cover_every_row_once_within_the_budget(window, budget, monkeypatch):
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", budget)
    config = tiny_config(sliding_window=window)
    model = random_decoder(config)
    positions = torch.arange(37)
    ctx = AttentionContext(model.positions, positions, positions, window, torch.float32)
    blocks = ctx.row_blocks(37, batch_heads=4)
    assert [r for block in blocks for r in range(block.start, block.stop)] == list(range(37))
    for rows in blocks:
        keys = ctx.key_range(rows)
        assert keys.stop == rows.stop  # never a key in the future of the block's last row
        if window is not None:
            assert keys.start == max(0, rows.start - window + 1)
        small = rows.stop - rows.start <= attention.MIN_BLOCK_ROWS
        assert small or 4 * (rows.stop - rows.start) * (keys.stop - keys.start) <= budget


# ---- rebuilding maps from q_rot / k_rot -----------------------------------------------------------
@pytest.mark.parametrize("variant", ATTENTION_VARIANTS)
@pytest.mark.parametrize("band_rows", [512, 4])
def test_rebuilt_maps_equal_the_eager_maps(variant, band_rows, monkeypatch):
    monkeypatch.setattr(maps, "REBUILD_BAND_ROWS", band_rows)
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, 23, batch=2)
    tr = trace(model, ids, capture=("attn_probs", "q_rot", "k_rot"))  # one run: same q and k as the maps
    for layer in range(config.n_layers):
        for head in range(config.n_heads):
            for batch in range(2):
                stored = tr["attn_probs"][layer, batch, head]
                assert_close(rebuild_attention(tr, layer, head, batch=batch), stored, rtol=1e-6, atol=1e-7)
                assert_close(rebuild_attention(tr, layer, head, rows=slice(7, 12), batch=batch), stored[7:12],
                             rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("variant", ["gqa", "sliding_window", "alibi"])
def test_summary_trace_rebuilds_any_map_on_demand(variant, block_size):
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, N_TOKENS)
    stored, summaries = trace(model, ids, capture="attn_probs"), trace(model, ids, capture=SUMMARY_CAPTURE)
    assert "attn_probs" not in summaries and summaries.recipe is not None
    for layer in range(config.n_layers):
        for head in range(config.n_heads):
            assert_close(summaries.attn(layer, head), stored.attn(layer, head), rtol=1e-5, atol=1e-6)
    assert_close(summaries.attn(1, 2, rows=slice(30, 33)), stored.attn(1, 2)[30:33], rtol=1e-5, atol=1e-6)


def test_attn_without_maps_or_queries_and_keys_raises():
    config = tiny_config()
    tr = trace(random_decoder(config), random_ids(config, 5), capture=("head_summaries", "q_rot"))
    assert tr.recipe is None
    with pytest.raises(CaptureError, match="no attention maps in this trace"):
        tr.attn(0, 0)
    with pytest.raises(CaptureError, match="layer 1 was not captured"):
        trace(random_decoder(config), random_ids(config, 5), capture=SUMMARY_CAPTURE, layers=[0]).attn(1, 0)


# ---- compact storage ------------------------------------------------------------------------------
@pytest.mark.parametrize("storage", [MapStorage(dtype=torch.float16), MapStorage(lower_triangle=True),
                                     MapStorage(dtype=torch.float16, lower_triangle=True)], ids=str)
@pytest.mark.parametrize("variant", ["gqa", "sliding_window", "alibi"])
def test_compact_map_storage_round_trips(storage, variant):
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, 17)
    full, compact = trace(model, ids, capture="attn_probs"), trace(model, ids, capture="attn_probs", maps=storage)
    stored = compact["attn_probs"]
    assert stored.nbytes == config.n_layers * config.n_heads * storage.bytes_per_map(17, 17)
    tolerance = dict(rtol=1e-3, atol=1e-3) if storage.dtype == torch.float16 else dict(rtol=0, atol=0)
    for layer in range(config.n_layers):
        for head in range(config.n_heads):
            assert_close(compact.attn(layer, head), full.attn(layer, head), **tolerance)
            assert_close(compact.attn(layer, head, rows=slice(4, 9)), full.attn(layer, head)[4:9], **tolerance)
