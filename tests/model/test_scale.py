"""Granite's fixed multipliers: every sublayer's output times ``residual_scale`` before it joins the
residual, and the logits divided by ``logit_divisor``; the identity at their defaults."""

from __future__ import annotations

import torch
from torch.testing import assert_close

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.model.scale import identity, make_divide, make_multiply

CAPTURE = ("attn_out", "ffn_out", "resid", "logits")


def test_logits_are_divided_by_the_logit_divisor():
    config = tiny_config(n_kv_heads=2)
    ids = random_ids(config, 8)
    plain, divided = random_decoder(config), random_decoder(config.replace(logit_divisor=4.0))
    with torch.inference_mode():
        assert torch.equal(divided(ids), plain(ids) / 4.0)


def test_each_sublayer_joins_the_residual_times_the_residual_scale():
    config = tiny_config(n_kv_heads=2, n_experts=4, top_k=2)
    ids = random_ids(config, 8)
    plain = trace(random_decoder(config), ids, capture=CAPTURE)
    scaled = trace(random_decoder(config.replace(residual_scale=0.25)), ids, capture=CAPTURE)
    assert_close(scaled["attn_out"][0], 0.25 * plain["attn_out"][0])  # layer 0 sees the same input
    resid = scaled["resid"]
    for layer in range(config.n_layers):
        assert_close(resid[layer + 1], resid[layer] + scaled["attn_out"][layer] + scaled["ffn_out"][layer])
    assert not torch.allclose(scaled["logits"], plain["logits"])


def test_the_defaults_are_the_identity_without_a_wrapper():
    assert make_multiply(1.0) is identity and make_divide(1.0) is identity
    model = random_decoder(tiny_config())
    assert model.layers[0].scale_residual is identity
