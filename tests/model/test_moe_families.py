"""The MoE families as configuration (Qwen2-MoE's dense layer and gated shared expert, OLMoE's QK-norm
across heads, Granite-MoE's router and multipliers): the invariants every variant keeps, as the dense
families' do. Cached decode = full recompute; every attention path agrees and captures leave the logits
unchanged; rebuilt maps equal the captured ones; the parameter count is exact; the routing a trace
records is the same whether the MoE layers are asked for alone or with the rest. Parity with
transformers: tests/loading/test_hf_moe_families.py."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import family_variants, random_decoder, random_ids, tiny_config
from txviz import KVCache
from txviz.analysis.moe.routing import router_captures
from txviz.capture.maps import rebuild_attention
from txviz.capture.trace import SUMMARY_CAPTURE, trace
from txviz.model.counts import count_params

N_TOKENS = 13
VARIANTS = family_variants("qwen_moe_like", "olmoe_like", "granite_moe_like")


def model_of(variant: str):
    return random_decoder(tiny_config(**VARIANTS[variant]))


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
    routed = trace(model, ids, capture=["logits", *router_captures(model.config)], layers=model.config.moe_layers)
    for other in (eager, blockwise, routed):
        assert_close(other["logits"], fused, rtol=1e-5, atol=1e-5)
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
    model = model_of(variant)
    assert count_params(model.config) == sum(p.numel() for p in model.parameters())


def test_the_routing_of_one_moe_layer_is_the_same_alone_or_among_all():
    model = model_of("qwen_moe_like")  # layers 0 and 2 routed, 1 dense
    ids = random_ids(model.config, N_TOKENS)
    both = trace(model, ids, capture=router_captures(model.config), layers=model.config.moe_layers)
    alone = trace(model, ids, capture=router_captures(model.config), layers=[2])
    for name in router_captures(model.config):
        assert torch.equal(alone[name][0], both[name][1])
