"""Attention sinks (gpt-oss): a learned logit per head in every softmax's denominator. The weights shown
are those over real keys, each row summing to 1 minus the sink's recorded share; every attention path
(eager, blockwise, fused), the maps rebuilt from q_rot/k_rot, the row summaries and a cached decode agree;
the parameter count includes the sinks. Parity with transformers' gpt-oss: tests/loading/test_hf_gpt_oss.py.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz import KVCache
from txviz.analysis.heads.metrics import head_metrics
from txviz.capture.maps import rebuild_attention
from txviz.capture.summaries import head_metrics as summary_metrics
from txviz.capture.trace import SUMMARY_CAPTURE, trace
from txviz.model.counts import count_params
from txviz.model.sinks import softmax_with_sink

N_TOKENS, WINDOW = 13, 5
SINKS = dict(attn_sinks=True, n_layers=2, n_kv_heads=2, layer_types=("sliding", "full"), sliding_window=WINDOW)


def sink_model(sink_logits: float | None = None, **overrides):
    model = random_decoder(tiny_config(**{**SINKS, **overrides}))
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for layer in model.layers:
            drawn = torch.randn(layer.attn.sinks.shape, generator=generator)
            layer.attn.sinks.copy_(drawn if sink_logits is None else torch.full_like(drawn, sink_logits))
    return model


def test_the_weights_and_the_sinks_share_are_one_softmax_over_both():
    scores = torch.randn(2, 3, 4, 6, dtype=torch.float64)
    scores[..., 4:] = float("-inf")  # masked keys
    sinks = torch.tensor([-1.0, 0.5, 3.0], dtype=torch.float64)
    probs, share = softmax_with_sink(scores, sinks)
    expected = torch.softmax(torch.cat([scores, sinks[:, None, None].expand(2, 3, 4, 1)], dim=-1), dim=-1)
    assert_close(probs, expected[..., :-1], rtol=0, atol=1e-15)
    assert_close(share, expected[..., -1], rtol=0, atol=1e-15)
    assert_close(probs.sum(-1) + share, torch.ones_like(share), rtol=0, atol=1e-15)


def test_every_map_row_sums_to_one_minus_the_sinks_share():
    model = sink_model()
    tr = trace(model, random_ids(model.config, N_TOKENS, batch=2), capture=["attn_probs", "attn_sink"])
    share = tr["attn_sink"]  # (L, B, H, T)
    assert share.shape == (2, 2, 4, N_TOKENS) and bool((share > 0.01).all())
    assert_close(tr["attn_probs"].sum(-1), 1 - share, rtol=0, atol=1e-6)


def test_a_large_sink_logit_takes_nearly_all_attention():
    model = sink_model(sink_logits=30.0)
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["attn_probs", "attn_sink"])
    assert bool((tr["attn_sink"] > 0.999).all()) and float(tr["attn_probs"].max()) < 1e-3


def test_the_fused_kernel_keeps_the_sink():
    model = sink_model()
    ids = random_ids(model.config, N_TOKENS, batch=2)
    eager = trace(model, ids, capture=["logits", "attn_probs"])["logits"]
    with torch.inference_mode():
        assert_close(model(ids), eager, rtol=1e-5, atol=1e-5)
        without = sink_model(sink_logits=-1e4)  # the sink off: another model, other logits
        assert (without(ids) - eager).abs().max() > 1e-3


@pytest.mark.parametrize("chunks", [[1] * N_TOKENS, [7] + [1] * 6, [3, 8, 2]])  # 7, 8 > window
def test_cached_decode_equals_full_recompute(chunks):
    model = sink_model()
    ids = random_ids(model.config, N_TOKENS, batch=2)
    cache = KVCache(model.config, N_TOKENS, batch=2)
    with torch.inference_mode():
        full = model(ids)
        steps, start = [], 0
        for size in chunks:
            steps.append(model(ids[:, start:start + size], cache=cache))
            start += size
    assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_rebuilt_maps_equal_the_captured_ones():
    model = sink_model()
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["attn_probs", "q_rot", "k_rot"])
    for layer in range(2):
        for head in range(4):
            assert_close(rebuild_attention(tr, layer, head), tr.get("attn_probs", layer)[0, head], rtol=0, atol=1e-6)


def test_blockwise_summaries_equal_the_metrics_of_the_maps():
    model = sink_model()
    ids = random_ids(model.config, N_TOKENS)
    blockwise = summary_metrics(trace(model, ids, capture=SUMMARY_CAPTURE)["head_summaries"][:, 0])
    eager = trace(model, ids, capture=["head_summaries", "attn_probs"])
    from_maps = head_metrics(eager["attn_probs"][:, 0], ids[0])
    for name, value in from_maps.items():
        assert_close(blockwise[name], value, rtol=1e-5, atol=1e-5, equal_nan=True, msg=name)
    assert_close(trace(model, ids, capture=SUMMARY_CAPTURE)["head_summaries"], eager["head_summaries"],
                 rtol=1e-5, atol=1e-5, equal_nan=True)


def test_the_parameter_count_includes_one_sink_per_head_and_layer():
    config = tiny_config(**SINKS)
    model = random_decoder(config)
    assert count_params(config) == sum(p.numel() for p in model.parameters())
    assert count_params(config) - count_params(config.replace(attn_sinks=False)) == 2 * 4


def test_models_without_sinks_record_no_share():
    model = random_decoder(tiny_config())
    assert "attn_sink" not in trace(model, random_ids(model.config, N_TOKENS), capture=["attn_sink"]).data
