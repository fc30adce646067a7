"""The route ``txviz bench`` times beside the traced path when a trace misses its target: the entropy from
the fused kernel's own outputs (txviz.bench.attention.lse_route). Its time only means something if it
computes the right numbers, so they are held to the summaries' and the fused output here."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.bench.attention import describe, lse_route
from txviz.capture.summaries import METRICS


def _layer_inputs(model, ids, layer):
    tr = trace(model, ids, capture=("q_rot", "k_rot", "v", "head_summaries", "attn_probs"), layers=[layer])
    positions = torch.arange(ids.shape[1])
    ctx = model.layer_context(layer, positions, positions, torch.float32)
    return tr, [tr.get(name, layer) for name in ("q_rot", "k_rot", "v")], ctx


@pytest.mark.parametrize("variant", ["mha", "gqa", "mqa", "yarn"])
def test_the_routes_entropy_and_output_equal_the_summaries_and_the_fused_kernel(variant):
    config = tiny_config(**VARIANTS[variant])
    model, ids, layer = random_decoder(config), random_ids(config, 40), 1
    tr, (q, k, v), ctx = _layer_inputs(model, ids, layer)
    attn = model.layers[layer].attn
    with torch.inference_mode():
        out, entropy = lse_route(attn, q, k, v, ctx)()
        fused = attn.attend(q, k, v, ctx)
    assert_close(out, fused, rtol=1e-5, atol=1e-6)
    expected = tr.get("head_summaries", layer)[..., METRICS.index("entropy")]  # (B, H, T), row 0 undefined
    assert_close(entropy[..., 1:], expected[..., 1:], rtol=1e-4, atol=1e-5)
    probs = tr.get("attn_probs", layer)  # and from the eager map itself: −Σ p ln p
    assert_close(entropy, -torch.special.xlogy(probs, probs).sum(-1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("overrides", [VARIANTS["sliding_window"], VARIANTS["alibi"], dict(attn_softcap=5.0)])
def test_no_route_where_the_kernel_cannot_run_the_layer_as_the_model_does(overrides):
    config = tiny_config(**overrides)
    model, ids = random_decoder(config), random_ids(config, 12)
    _, (q, k, v), ctx = _layer_inputs(model, ids, 0)
    assert lse_route(model.layers[0].attn, q, k, v, ctx) is None


def test_the_report_compares_the_route_with_the_traced_path():
    parts = {"layer": 0, "tokens": 1024, "fused_s": 0.016, "traced_s": 0.025, "products_s": 0.012,
             "softmax_s": 0.004, "summaries_s": 0.009, "n_layers": 30}
    assert "route" not in describe(parts)  # runs without it (another device) say nothing of it
    slower = describe({**parts, "lse_route_s": 0.034})
    assert "takes 34.0 (2.12× the fused kernel), more than the whole traced path" in slower
    assert "less than the whole traced path" in describe({**parts, "lse_route_s": 0.020})


def test_where_products_and_softmax_beat_the_fused_kernel_the_excess_is_the_summaries():
    parts = {"layer": 0, "tokens": 1024, "fused_s": 0.016, "traced_s": 0.0239, "products_s": 0.0101,
             "softmax_s": 0.0039, "summaries_s": 0.0093, "n_layers": 30}
    text = describe(parts, plain_s=3.0)
    assert "0.24 s more than the fused kernel, while products and softmax alone" in text
    assert "cost 0.06 s less than the fused kernel: the whole excess is the summaries" in text
    assert "a trace at ≥" not in text  # no floor above 1× to state


def test_at_a_short_prompt_the_report_says_how_much_of_the_excess_lies_outside_attention():
    parts = {"layer": 0, "tokens": 64, "fused_s": 0.000128, "traced_s": 0.000330, "products_s": 0.00009,
             "softmax_s": 0.00003, "summaries_s": 0.00021, "n_layers": 30}
    text = describe(parts, plain_s=0.138, trace_s=0.155)
    assert "fused kernel 0.128; traced 0.330 (2.58×)" in text  # not rounded to 0.1 and 0.3
    assert "that is 6.06 ms more than the fused kernel" in text  # 30 × 0.202 ms, not "0.00 s"
    assert "Of the trace's 17.0 ms over the plain forward, that is 36%; the other 10.9 ms lies outside" in text
    assert "outside attention" not in describe(parts, plain_s=0.138)  # without the trace's time, nothing to split
    assert "accounts for all of the trace's 5.00 ms" in describe(parts, plain_s=0.138, trace_s=0.143)
