"""Per-call capture, so that sessions sharing one model never see each other's hooks: opt-in, named,
validated, immutable, thread-safe, and it never changes what the model computes."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.expected import expected_shapes
from tests.helpers.tiny import VARIANTS, default_inv_freq, random_decoder, random_ids, rotate_pairs_reference, tiny_config
from txviz import CAPTURES, CaptureError, kv_cache_bytes, trace

ATTENTION_CAPTURES = ("attn_logits", "attn_scores", "attn_probs", "attn_sink", "head_summaries")  # not the fused kernel
OTHER_CAPTURES = tuple(name for name in CAPTURES if name not in ATTENTION_CAPTURES)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_capturing_without_attention_leaves_logits_bit_identical(variant):
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, 9)
    with torch.inference_mode():
        plain = model(ids)
    assert torch.equal(trace(model, ids, capture=OTHER_CAPTURES)["logits"], plain)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_capturing_attention_eager_path_matches_fused_sdpa(variant):
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, 9)
    with torch.inference_mode():
        fused = model(ids)
    eager = trace(model, ids, capture=ATTENTION_CAPTURES + ("logits",))["logits"]
    assert_close(eager, fused, rtol=1e-5, atol=1e-5)


# ---- validation and immutability ----------------------------------------------------------------
@pytest.fixture(scope="module")
def moe_model():
    return random_decoder(tiny_config(n_layers=3, n_kv_heads=2, n_experts=4, top_k=2))


def test_unknown_capture_names_raise(moe_model):
    ids = random_ids(moe_model.config, 4)
    with pytest.raises(CaptureError, match=r"unknown capture names \['attention'\]"):
        trace(moe_model, ids, capture=("attn_probs", "attention"))
    tr = trace(moe_model, ids, capture="resid")
    with pytest.raises(CaptureError, match="unknown capture 'nonsense'"):
        tr["nonsense"]
    with pytest.raises(CaptureError, match="'attn_probs' was not captured"):
        tr["attn_probs"]


@pytest.mark.parametrize("layers", [[3], [-1], [0, 7]])
def test_layers_out_of_range_raise(moe_model, layers):
    with pytest.raises(CaptureError, match="out of range"):
        trace(moe_model, random_ids(moe_model.config, 4), layers=layers)


@pytest.mark.parametrize("layers", [[0], [2], [2, 0], [1, 1, 2]])
def test_layer_subsets_give_those_layers(moe_model, layers):
    ids = random_ids(moe_model.config, 6)
    names = ("attn_probs", "ffn_out", "router_probs")
    full, subset = trace(moe_model, ids, capture=names), trace(moe_model, ids, capture=names, layers=layers)
    assert subset.layers == tuple(sorted(set(layers)))
    for name in names:
        assert subset[name].shape[0] == len(subset.layers)
        for layer in subset.layers:  # uncaptured layers take the fused path: equal up to rounding
            assert_close(subset.get(name, layer), full.get(name, layer), rtol=1e-5, atol=1e-6)
    missing = next(i for i in range(3) if i not in subset.layers)
    with pytest.raises(CaptureError, match=f"layer {missing} was not captured"):
        subset.get("attn_probs", missing)


def test_trace_is_immutable(moe_model):
    tr = trace(moe_model, random_ids(moe_model.config, 4), capture=("resid", "attn_probs"))
    with pytest.raises(TypeError):
        tr.data["resid"] = torch.zeros(1)
    with pytest.raises(TypeError):
        del tr.data["attn_probs"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tr.ids = torch.zeros(1)
    assert tr["resid"].device.type == "cpu" and not tr["resid"].requires_grad




@pytest.mark.parametrize("variant", ["moe", "alibi", "learned", "mqa"])
@pytest.mark.parametrize("layers", [None, [1]])
def test_captured_shapes_per_name(variant, layers):
    config = tiny_config(**VARIANTS[variant], n_layers=3)
    tr = trace(random_decoder(config), random_ids(config, 7), capture=tuple(CAPTURES), layers=layers)
    expected = expected_shapes(config, 3 if layers is None else len(layers), 7)
    assert {name: tuple(tr[name].shape) for name in tr.data} == expected


@pytest.mark.parametrize("variant", ["mha", "gqa", "mqa"])
def test_kv_bytes_capture_is_the_keys_and_values_of_the_prompt(variant):
    config = tiny_config(**VARIANTS[variant])
    tr = trace(random_decoder(config), random_ids(config, 7), capture="kv_bytes")
    per_layer = kv_cache_bytes(config, 7, bytes_per_element=4) / config.n_layers
    assert tr["kv_bytes"].tolist() == [per_layer] * config.n_layers


# ---- what the captures mean ---------------------------------------------------------------------
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_q_rot_and_k_rot_are_rope_applied_to_q_and_k(n_kv_heads):
    config = tiny_config(n_kv_heads=n_kv_heads)
    tr = trace(random_decoder(config), random_ids(config, 10), capture=("q", "k", "q_rot", "k_rot"))
    inv_freq, positions = default_inv_freq(config.head_dim, config.rope_theta), torch.arange(10)
    for raw, rotated in [("q", "q_rot"), ("k", "k_rot")]:
        expected = rotate_pairs_reference(tr[raw], positions, inv_freq)
        assert_close(tr[rotated].double(), expected, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(tr["q_rot"], tr["q"])  # positions > 0 really are rotated


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_attention_rows_sum_to_one_and_never_look_ahead(variant):
    config = tiny_config(**VARIANTS[variant])
    probs = trace(random_decoder(config), random_ids(config, 9, batch=2), capture="attn_probs")["attn_probs"]
    assert_close(probs.sum(dim=-1), torch.ones(probs.shape[:-1]))
    distance = torch.arange(9)[:, None] - torch.arange(9)[None, :]  # query i minus key j
    hidden = distance < 0
    if config.sliding_window:
        hidden |= distance >= config.sliding_window
    assert (probs[..., hidden] == 0).all()
    assert (probs[..., ~hidden] > 0).all()


def test_concurrent_traces_on_one_model_equal_sequential_ones():
    config = tiny_config(**VARIANTS["moe"])
    model = random_decoder(config)
    prompts = [random_ids(config, 3 + i, seed=i) for i in range(8)]
    capture = ("attn_probs", "resid", "router_probs", "logits")
    sequential = [trace(model, ids, capture=capture) for ids in prompts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            concurrent = list(pool.map(lambda ids: trace(model, ids, capture=capture), prompts))
            for seq, con in zip(sequential, concurrent):
                assert torch.equal(seq.ids, con.ids)
                assert set(seq.data) == set(con.data)
                assert all(torch.equal(seq[name], con[name]) for name in capture)


def test_progress_is_told_after_every_layer_in_order_and_changes_nothing():
    config = tiny_config()
    model = random_decoder(config)
    ids = random_ids(config, 12)
    seen = []
    with_progress = trace(model, ids, capture=("attn_probs", "resid"), progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, config.n_layers) for i in range(1, config.n_layers + 1)]
    plain = trace(model, ids, capture=("attn_probs", "resid"))
    for name in ("attn_probs", "resid"):
        torch.testing.assert_close(with_progress[name], plain[name], rtol=0, atol=0)
    seen.clear()
    trace(model, ids, capture=(), layers=[0], progress=lambda done, total: seen.append(done))
    assert seen == list(range(1, config.n_layers + 1))  # every layer runs, whatever is captured
