"""What Gemma / Gemma 2 / Gemma 3 need, as configuration: per-layer kinds (full or sliding, each with its
RoPE base), QK-norm, post-norms, GeGLU, embedding and query scales, soft-caps. The config's checks,
the KV cache with per-layer windows (cached decode = full recompute on a prompt longer than the window,
local layers holding only their window), the one rule that picks the attention path, and the captures
that must follow each layer's window. Parity with transformers: tests/loading/test_hf_gemma.py.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from tests.helpers.tiny import (FAMILY_WINDOW, GEMMA3_KINDS, family_variants, random_decoder, random_ids,
                                tiny_config)
from txviz import KVCache, ModelConfig, kv_cache_bytes
from txviz.analysis.block import block_walkthrough
from txviz.capture.cost import capture_cost
from txviz.capture.maps import rebuild_attention
from txviz.capture.trace import SUMMARY_CAPTURE, trace
from txviz.config import ConfigError
from txviz.model.attention import attention_path

WINDOW, N_TOKENS, KINDS = FAMILY_WINDOW, 13, GEMMA3_KINDS  # the prompt is over twice the window: the rings wrap
VARIANTS = family_variants("gemma3_like", "gemma2_like", "gemma3_capped")
GEMMA3_LIKE, GEMMA2_LIKE = VARIANTS["gemma3_like"], VARIANTS["gemma2_like"]


def model_of(variant: str):
    return random_decoder(tiny_config(**VARIANTS[variant]))


# ---- the config ---------------------------------------------------------------------------------
def test_layer_windows_and_rope_bases_follow_the_layer_types():
    config = tiny_config(**GEMMA3_LIKE)
    assert [config.layer_window(i) for i in range(4)] == [WINDOW, WINDOW, None, WINDOW]
    assert [config.is_sliding(i) for i in range(4)] == [True, True, False, True]
    assert [config.layer_rope_theta(i) for i in range(4)] == [50.0, 50.0, 5000.0, 50.0]
    with pytest.raises(IndexError):
        config.layer_window(4)


def test_without_layer_types_every_layer_is_what_sliding_window_says():
    assert tiny_config(sliding_window=7).layer_windows == (7, 7)
    assert tiny_config().layer_windows == (None, None)
    assert tiny_config(sliding_window=7, rope_local_theta=10.0).layer_rope_theta(0) == 10.0


def test_a_json_round_trip_gives_the_same_config_with_tuples():
    config = tiny_config(**GEMMA2_LIKE)
    again = ModelConfig.from_dict(json.loads(config.to_json()))
    assert again == config and isinstance(again.layer_types, tuple)


@pytest.mark.parametrize("overrides, message", [
    (dict(layer_types=("full",) * 3), "layer_types has 3 entries but n_layers=2"),
    (dict(layer_types=("full", "global")), r"unknown kinds \['global'\]"),
    (dict(layer_types=("sliding", "full")), "sliding_window is None"),
    (dict(layer_types="sliding", sliding_window=4), "layer_types must be a list"),
    (dict(attn_softcap=0.0), "attn_softcap must be > 0"),
    (dict(final_softcap=float("nan")), "final_softcap must be > 0"),
    (dict(query_scale=-1.0), "query_scale must be > 0"),
    (dict(rope_local_theta=0.0), "rope_local_theta must be > 0"),
    (dict(embed_scale="8"), "embed_scale must be float"),
    (dict(ffn="reglu"), "ffn must be one of"),
])
def test_bad_gemma_fields_are_refused_with_a_clear_message(overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**overrides)


def test_only_the_options_asked_for_add_parameters():
    plain = set(random_decoder(tiny_config()).state_dict())
    gemma = set(model_of("gemma3_like").state_dict())
    assert plain < gemma or plain - {"lm_head.weight"} < gemma
    added = {name.split(".", 2)[2] for name in gemma - plain if name.startswith("layers.0.")}
    assert added == {"attn.q_norm.weight", "attn.k_norm.weight", "post_attn_norm.weight", "post_ffn_norm.weight"}


# ---- the KV cache -------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("chunks", [[1] * N_TOKENS, [7] + [1] * 6, [3, 8, 2]])  # 7, 8 > window: a chunk wraps
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


def test_local_layers_keep_only_their_window_and_global_layers_everything():
    model = model_of("gemma3_like")
    cache = KVCache(model.config, N_TOKENS)
    with torch.inference_mode():
        for token in random_ids(model.config, N_TOKENS)[0]:
            model(token[None, None], cache=cache)
    for layer, kind in enumerate(KINDS):
        held = sorted(cache.layer(layer).positions.tolist())
        assert held == (list(range(N_TOKENS - WINDOW, N_TOKENS)) if kind == "sliding" else list(range(N_TOKENS)))
    per_layer = cache.nbytes_per_layer()
    assert per_layer[2] == per_layer[0] * N_TOKENS // WINDOW


@pytest.mark.parametrize("tokens", [1, WINDOW - 1, WINDOW, WINDOW + 1, N_TOKENS])
def test_the_formula_sums_each_layers_window_and_equals_the_buffers(tokens):
    model = model_of("gemma3_like")
    cache = KVCache(model.config, N_TOKENS)
    with torch.inference_mode():
        model(random_ids(model.config, tokens), cache=cache)
    assert sum(cache.used_nbytes_per_layer()) == kv_cache_bytes(model.config, tokens, bytes_per_element=4)
    per_layer_token = 2 * model.config.head_dim * 4  # one KV head, K and V, fp32
    assert kv_cache_bytes(model.config, tokens, bytes_per_element=4) == per_layer_token * (
        3 * min(tokens, WINDOW) + tokens)


# ---- the attention path: one rule --------------------------------------------------------------
def test_soft_capped_scores_never_take_the_fused_kernel(monkeypatch):
    def no_fused_kernel(*args, **kwargs):
        raise AssertionError("the fused kernel has no soft cap")

    capped, plain = model_of("gemma2_like"), model_of("gemma3_like")
    ids = random_ids(capped.config, N_TOKENS)
    expected = trace(capped, ids, capture=["logits", "attn_probs"])["logits"]  # the eager path
    monkeypatch.setattr(F, "scaled_dot_product_attention", no_fused_kernel)
    with torch.inference_mode():
        assert_close(capped(ids), expected, rtol=1e-5, atol=1e-5)
        with pytest.raises(AssertionError, match="no soft cap"):
            plain(ids)  # without a cap the plain call does take it
    assert attention_path([], softcapped=True) == capture_cost(capped.config, 64, []).path == "blockwise"
    assert attention_path([]) == capture_cost(plain.config, 64, []).path == "fused"


# ---- captures follow each layer's window --------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_rebuilt_maps_equal_the_captured_ones_on_every_layer(variant):
    model = model_of(variant)
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["attn_probs", "q_rot", "k_rot"])
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            assert_close(rebuild_attention(tr, layer, head), tr.get("attn_probs", layer)[0, head], rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_blockwise_summaries_equal_the_eager_ones(variant):
    model = model_of(variant)
    ids = random_ids(model.config, N_TOKENS)
    blockwise = trace(model, ids, capture=SUMMARY_CAPTURE)["head_summaries"]
    eager = trace(model, ids, capture=["head_summaries", "attn_probs"])["head_summaries"]
    assert_close(blockwise, eager, rtol=1e-5, atol=1e-5, equal_nan=True)  # NaN: a metric with nothing to measure


def test_rope_tables_recorded_are_the_global_layers():
    model = model_of("gemma3_like")
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["rope_angles"])
    inv_freq = 1.0 / 5000.0 ** (torch.arange(0, 16, 2).float() / 16)
    assert_close(tr["rope_angles"], torch.arange(N_TOKENS).float()[:, None] * inv_freq[None])


@pytest.mark.parametrize("layer", range(4))
def test_block_walkthrough_follows_the_layer_kind_and_post_norms(layer):
    model = model_of("gemma3_capped")
    ids = random_ids(model.config, N_TOKENS)
    resid = trace(model, ids, capture=["resid"])["resid"]  # (L+1, B, T, d)
    steps, out = block_walkthrough(model, resid[layer, 0], layer)
    assert_close(out, resid[layer + 1, 0], rtol=1e-5, atol=1e-5)
    assert steps[6].name == "GeGLU FFN"  # after the post-attention norm's row


# ---- embeddings and logits ----------------------------------------------------------------------
def test_embeddings_are_scaled_by_the_scale_rounded_to_the_dtype():
    model = model_of("gemma3_like").to(torch.bfloat16)
    ids = random_ids(model.config, N_TOKENS)
    resid0 = trace(model, ids, capture=["resid"])["resid"][0, 0]
    scale = torch.tensor(32 ** 0.5).to(torch.bfloat16)  # as transformers' buffer: 5.65625, not 5.6568…
    assert torch.equal(resid0, model.embed.weight[ids[0]] * scale)


def test_final_soft_cap_is_c_tanh_of_the_uncapped_logits():
    capped = model_of("gemma2_like")
    uncapped = random_decoder(capped.config.replace(final_softcap=None))
    with torch.no_grad():
        capped.lm_head.weight.mul_(4)  # logits beyond the cap of 2
    uncapped.load_state_dict(capped.state_dict())
    ids = random_ids(capped.config, N_TOKENS)
    with torch.no_grad():
        raw = uncapped(ids)
        assert raw.abs().max() > 2.0  # the cap bites
        assert_close(capped(ids), 2.0 * torch.tanh(raw / 2.0), rtol=0, atol=0)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_memory_calculator_counts_the_new_parts_and_the_per_layer_windows(variant):
    from txviz.analysis.kv import memory, memory_model
    from txviz.model.counts import count_params

    model = model_of(variant)
    assert count_params(model.config) == sum(p.numel() for p in model.parameters())
    spec = memory_model.MemoryModel.from_config(model.config)
    for tokens in (1, WINDOW, N_TOKENS, 1000):
        expected = kv_cache_bytes(model.config, tokens, bytes_per_element=4)
        assert memory.kv_cache_bytes_at(spec, tokens, 1, "fp32") == expected
