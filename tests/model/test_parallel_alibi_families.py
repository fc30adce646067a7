"""What BLOOM, MPT, GPT-NeoX and Phi need, as configuration: the parallel block, partial rotary, a norm
on the embeddings, LayerNorm without a bias, ALiBi's slope maximum. The config's checks and round trip,
each piece against its formula (and partial rotary against transformers' own function), and the
invariants every variant keeps: cached decode = full recompute, a capture leaves the logits unchanged,
the fused, blockwise and eager paths agree, rebuilt maps equal the captured ones, the parameter count
is exact. Parity of whole checkpoints with transformers: tests/loading/test_hf_bloom_mpt_neox.py.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.tiny import family_variants, random_decoder, random_ids, tiny_config
from txviz import KVCache, ModelConfig
from txviz.capture.maps import rebuild_attention
from txviz.capture.trace import SUMMARY_CAPTURE, trace
from txviz.config import ConfigError
from txviz.model.positions import alibi_slopes, apply_rotary
from txviz.model.transformer import MoEBlock, ParallelBlock, ParallelMoEBlock

N_TOKENS = 11
VARIANTS = family_variants("bloom_like", "mpt_like", "neox_like", "neox_sequential", "phi_like_partial_gqa_window",
                           "parallel_moe")
MPT_LIKE = VARIANTS["mpt_like"]


def model_of(variant: str):
    return random_decoder(tiny_config(**VARIANTS[variant]))


# ---- the config ---------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, message", [
    (dict(rotary_dims=3), "rotary_dims"), (dict(rotary_dims=10), "rotary_dims"), (dict(rotary_dims=0), "rotary_dims"),
    (dict(alibi_bias_max=0.0), "alibi_bias_max"), (dict(parallel_block=1), "parallel_block"),
    (dict(embed_norm="yes"), "embed_norm"), (dict(norm_bias=None), "norm_bias"),
])
def test_bad_fields_are_refused_with_a_clear_message(overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**overrides)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_json_round_trip_gives_the_same_config(variant):
    config = tiny_config(**VARIANTS[variant])
    assert ModelConfig.from_dict(json.loads(config.to_json())) == config


def test_rope_dims_is_all_of_the_head_unless_set():
    assert tiny_config().rope_dims == 8 and tiny_config(rotary_dims=4).rope_dims == 4


@pytest.mark.parametrize("variant, block", [("neox_like", ParallelBlock), ("parallel_moe", ParallelMoEBlock),
                                            ("neox_sequential", None)])
def test_the_block_kind_is_chosen_from_the_config(variant, block):
    layer = model_of(variant).layers[0]
    assert isinstance(layer, ParallelBlock) == (block is not None)
    assert block is None or type(layer) is block
    assert isinstance(layer, MoEBlock) == (variant == "parallel_moe")


def test_only_the_options_asked_for_change_parameters():
    plain = set(random_decoder(tiny_config(norm="layernorm", positions="alibi", n_heads=6, d_model=36)).state_dict())
    bloom = set(model_of("bloom_like").state_dict())
    assert {n for n in bloom - plain if not n.startswith("layers.")} == {"embed_norm.weight", "embed_norm.bias"}
    mpt = set(model_of("mpt_like").state_dict())
    assert not any(name.endswith("norm.bias") for name in mpt)


# ---- each piece against its formula -------------------------------------------------------------
@needs_transformers
def test_partial_rotary_equals_transformers_neox_function():
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb

    model = model_of("neox_like")
    positions = torch.arange(N_TOKENS)
    cos, sin = model.positions.rotation(positions)  # (T, rotary_dims)
    assert cos.shape == (N_TOKENS, 4)
    q, k = torch.randn(2, 2, 4, N_TOKENS, 8).unbind(0)
    expected_q, expected_k = apply_rotary_pos_emb(q, k, cos[None], sin[None])
    assert_close(apply_rotary(q, cos, sin), expected_q, rtol=0, atol=0)
    assert_close(apply_rotary(k, cos, sin), expected_k, rtol=0, atol=0)
    assert torch.equal(apply_rotary(q, cos, sin)[..., 4:], q[..., 4:])  # the rest passes through


def test_the_parallel_block_adds_both_branches_to_its_input():
    model = model_of("neox_like")
    layer, x = model.layers[0], torch.randn(1, N_TOKENS, 32)
    ctx = model.layer_context(0, torch.arange(N_TOKENS), torch.arange(N_TOKENS), x.dtype)
    with torch.inference_mode():
        expected = x + layer.attn(layer.attn_norm(x), ctx) + layer.ffn(layer.ffn_norm(x))
        assert_close(layer(x, ctx), expected, rtol=1e-6, atol=1e-6)


def test_the_embedding_norm_runs_before_the_first_block():
    model = model_of("bloom_like")
    ids = random_ids(model.config, N_TOKENS)
    tr = trace(model, ids, capture=["resid"])
    assert_close(tr["resid"][0], model.embed_norm(model.embed(ids)), rtol=0, atol=0)


@pytest.mark.parametrize("bias_max", [8.0, 12.0])
def test_alibi_bias_is_minus_slope_times_distance_with_the_configs_maximum(bias_max):
    model = random_decoder(tiny_config(**{**MPT_LIKE, "alibi_bias_max": bias_max}))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["alibi_bias"])
    distance = (torch.arange(N_TOKENS)[:, None] - torch.arange(N_TOKENS)[None, :]).float()
    slopes = torch.tensor([2 ** (-bias_max * h / 4) for h in range(1, 5)])  # 4 heads: a power of two
    assert_close(alibi_slopes(4, bias_max), slopes)
    assert_close(tr["alibi_bias"], -slopes[:, None, None] * distance)


# ---- invariants every variant keeps -------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("chunks", [[1] * N_TOKENS, [6, 1, 4]])
def test_cached_decode_equals_full_recompute(variant, chunks):
    model = model_of(variant)
    ids = random_ids(model.config, N_TOKENS, batch=2)
    cache = KVCache(model.config, N_TOKENS, batch=2)
    with torch.inference_mode():
        full = model(ids)
        steps, start = [], 0
        for size in chunks:
            steps.append(model(ids[:, start:start + size], cache=cache))
            start += size
    assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_captures_leave_logits_unchanged_and_every_path_agrees(variant):
    model = model_of(variant)
    ids = random_ids(model.config, N_TOKENS)
    with torch.inference_mode():
        fused = model(ids)
    eager = trace(model, ids, capture=["logits", "attn_probs", "head_summaries"])
    blockwise = trace(model, ids, capture=["logits", *SUMMARY_CAPTURE])
    assert_close(eager["logits"], fused, rtol=1e-5, atol=1e-5)
    assert_close(blockwise["logits"], fused, rtol=1e-5, atol=1e-5)
    assert_close(blockwise["head_summaries"], eager["head_summaries"], rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rebuilt_maps_equal_the_captured_ones(variant):
    model = model_of(variant)
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["attn_probs", "q_rot", "k_rot"])
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            assert_close(rebuild_attention(tr, layer, head), tr.get("attn_probs", layer)[0, head], rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_parameter_count_is_exact(variant):
    from txviz.model.counts import count_params

    model = model_of(variant)
    assert count_params(model.config) == sum(p.numel() for p in model.parameters())
