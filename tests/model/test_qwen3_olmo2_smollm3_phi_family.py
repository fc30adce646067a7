"""What Qwen3, OLMo 2, SmolLM3 and Phi-1/2 need, as configuration: QK-norm over each head or across all
heads (as the config's norm, RMSNorm or LayerNorm), blocks with only post-norms, layers that skip RoPE,
the parallel block with one shared norm, a bias on the unembedding. The config's checks and round trip,
and the invariants every variant keeps: cached decode = full recompute, every attention path agrees,
rebuilt maps equal the captured ones, the block walkthrough ends where the model does, the parameter
count is exact. Parity with transformers: tests/loading/test_hf_qwen3_olmo2_smollm3_phi.py."""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import family_variants, random_decoder, random_ids, tiny_config
from txviz import KVCache, ModelConfig
from txviz.analysis.block import block_walkthrough
from txviz.capture.maps import rebuild_attention
from txviz.capture.trace import SUMMARY_CAPTURE, trace
from txviz.config import ConfigError
from txviz.model.counts import count_params
from txviz.model.norm import LayerNormAcrossHeads, RMSNormAcrossHeads
from txviz.model.transformer import SharedNormParallelBlock

N_TOKENS = 13  # over twice the window
VARIANTS = family_variants("qwen3_like", "olmo2_like", "smollm3_like", "phi12_like")


def model_of(variant: str):
    return random_decoder(tiny_config(**VARIANTS[variant]))


# ---- the config ---------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, message", [
    (dict(qk_norm_scope="tokens"), "qk_norm_scope"),
    (dict(pre_norm="no"), "pre_norm"),
    (dict(layer_rope=(True,)), "layer_rope has 1 entries but n_layers=2"),
    (dict(layer_rope=(1, 0)), "layer_rope must be a list of true/false"),
    (dict(layer_rope=(True, False), positions="alibi"), "positions='alibi'"),
    (dict(shared_block_norm=True), "shared_block_norm needs parallel_block"),
    (dict(lm_head_bias=True, tie_embeddings=True), "lm_head_bias needs an untied lm_head"),
])
def test_bad_fields_are_refused_with_a_clear_message(overrides, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**overrides)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_json_round_trip_gives_the_same_config_with_tuples(variant):
    config = tiny_config(**VARIANTS[variant])
    again = ModelConfig.from_dict(json.loads(config.to_json()))
    assert again == config and (again.layer_rope is None or isinstance(again.layer_rope, tuple))


def test_every_existing_model_keeps_its_defaults():
    config = tiny_config()
    assert (config.pre_norm, config.qk_norm_scope, config.layer_rope, config.shared_block_norm,
            config.lm_head_bias) == (True, "head", None, False, False)
    assert [config.layer_uses_rope(i) for i in range(2)] == [True, True]
    assert not tiny_config(positions="alibi").layer_uses_rope(0)


# ---- each piece ---------------------------------------------------------------------------------
def test_olmo2_blocks_have_only_post_norms_and_qk_norms_across_heads():
    model = model_of("olmo2_like")
    layer = model.layers[0]
    assert isinstance(layer.attn_norm, torch.nn.Identity) and isinstance(layer.ffn_norm, torch.nn.Identity)
    assert isinstance(layer.attn.q_norm, RMSNormAcrossHeads)
    assert (layer.attn.q_norm.weight.shape, layer.attn.k_norm.weight.shape) == ((4 * 8,), (2 * 8,))


def test_the_norm_across_heads_normalizes_each_token_s_whole_projection():
    norm = RMSNormAcrossHeads(4 * 8, 1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(32))
    q = torch.randn(2, 4, 5, 8)  # (B, H, T, D)
    flat = q.transpose(1, 2).reshape(2, 5, 32)  # the projection before its split into heads
    expected = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight
    assert_close(norm(q), expected.view(2, 5, 4, 8).transpose(1, 2))


def test_phi_s_qk_norm_is_a_layernorm_per_head_and_its_ffn_reads_the_attention_s_norm():
    model = model_of("phi12_like")
    layer = model.layers[0]
    assert type(layer) is SharedNormParallelBlock
    assert (layer.attn.q_norm.weight.shape, layer.attn.q_norm.bias.shape) == ((8,), (8,))
    assert not any(name.startswith("layers.0.ffn_norm") for name in model.state_dict())
    assert model.lm_head.bias is not None and model.unembedding_bias is model.lm_head.bias
    x = torch.randn(1, N_TOKENS, 32)
    ctx = model.layer_context(0, torch.arange(N_TOKENS), torch.arange(N_TOKENS), x.dtype)
    with torch.inference_mode():
        normed = layer.attn_norm(x)
        assert_close(layer(x, ctx), x + layer.attn(normed, ctx) + layer.ffn(normed), rtol=1e-6, atol=1e-6)


def test_the_across_heads_layernorm_is_built_for_a_layernorm_model():
    model = random_decoder(tiny_config(norm="layernorm", qk_norm=True, qk_norm_scope="all_heads"))
    assert isinstance(model.layers[0].attn.k_norm, LayerNormAcrossHeads)


def test_nope_layers_get_no_rotation_and_their_own_kind():
    model = model_of("smollm3_like")
    kinds = [model.kind_of[i] for i in range(4)]
    assert kinds[0] == kinds[2] and len({kinds[0], kinds[1], kinds[3]}) == 3  # RoPE full, NoPE full, NoPE sliding
    ids = random_ids(model.config, N_TOKENS)
    tr = trace(model, ids, capture=["q", "q_rot", "rope_cos"])
    for layer, rope in enumerate((True, False, True, False)):
        assert torch.equal(tr["q_rot"][layer], tr["q"][layer]) != rope
    assert tr["rope_cos"] is not None  # a trace records the RoPE layers' tables


# ---- invariants every variant keeps -------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("chunks", [[1] * N_TOKENS, [7, 1, 5]])
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
def test_the_block_walkthrough_ends_where_the_model_does(variant):
    model = model_of(variant)
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["resid"])
    for layer in range(model.config.n_layers):
        _, out = block_walkthrough(model, tr["resid"][layer, 0], layer)
        assert_close(out, tr["resid"][layer + 1, 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_parameter_count_is_exact(variant):
    model = model_of(variant)
    assert count_params(model.config) == sum(p.numel() for p in model.parameters())


def test_the_lens_on_the_last_residual_is_the_model_s_own_logits_head_bias_included():
    from txviz.analysis.block import logit_lens
    from txviz.decoding.lens import lens_logits

    model = model_of("phi12_like")
    with torch.no_grad():
        model.lm_head.bias.mul_(50)  # a bias big enough to reorder the top tokens
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["logits", "resid"])
    last = tr["resid"][-1, 0]  # (T, d)
    assert_close(lens_logits(model, last), tr["logits"][0], rtol=1e-5, atol=1e-5)
    probs, ids = logit_lens(model, tr["resid"][:, 0, -1])
    assert torch.equal(ids[-1], tr["logits"][0, -1].topk(5).indices)
