"""The step-by-step recomputation follows each layer as the model runs it: the layer's own query scale,
its attention soft-cap and its mask (sliding window, ALiBi), on tiny random models."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.analysis.heads.steps import attention_steps, layer_attention, layer_steps
from txviz.capture.trace import trace

# Gemma-2-like: a query scale that is not 1/√d_k, a soft-cap, a sliding layer then a global one, GQA
LAYERED = dict(n_kv_heads=2, query_scale=0.3, attn_softcap=5.0, sliding_window=4, layer_types=("sliding", "full"))
VARIANTS = {
    "scale_cap_window": LAYERED,
    "scale_only": dict(query_scale=0.9),
    "cap_only": dict(n_kv_heads=1, attn_softcap=2.0),
    "alibi_window": dict(positions="alibi", sliding_window=3),
    "sinks_window": dict(attn_sinks=True, n_kv_heads=2, sliding_window=4, layer_types=("sliding", "full")),  # gpt-oss
}


def _model(variant: dict):
    config = tiny_config(**variant)
    model = random_decoder(config)
    with torch.no_grad():  # large scores, so the cap is far from the identity on them
        for block in model.layers:
            block.attn.q_proj.weight.mul_(4)
            block.attn.k_proj.weight.mul_(4)
            if config.attn_sinks:  # a different sink logit per head
                block.attn.sinks.copy_(torch.linspace(-2.0, 3.0, config.n_heads))
    return config, model


@pytest.mark.parametrize("name", VARIANTS)
def test_steps_equal_the_models_weights_on_every_head_of_every_layer(name):
    config, model = _model(VARIANTS[name])
    tr = trace(model, random_ids(config, 13), ("q_rot", "k_rot", "v", "attn_probs", "attn_logits"))
    for layer in range(config.n_layers):
        q_rot, k_rot, v = tr.get("q_rot", layer)[0], tr.get("k_rot", layer)[0], tr.get("v", layer)[0]
        for head in range(config.n_heads):
            steps = layer_steps(model, layer, head, q_rot, k_rot, v)
            assert (steps.probs - tr.attn(layer, head)).abs().max() <= 1e-6, (layer, head)
            assert (steps.capped - tr.get("attn_logits", layer)[0, head]).abs().max() <= 1e-6  # the capped logits


def test_the_steps_name_the_layers_scale_cap_and_window():
    config, model = _model(LAYERED)
    sliding, full = layer_steps(*_args(model, config, 0)), layer_steps(*_args(model, config, 1))
    assert (sliding.scale, sliding.softcap, sliding.window) == (0.3, 5.0, 4)
    assert full.window is None and layer_attention(model, 1).scale == 0.3
    assert sliding.capped.abs().max() < 5.0 < sliding.scaled.abs().max()  # the cap is a step of its own here
    rows, cols = torch.meshgrid(torch.arange(13), torch.arange(13), indexing="ij")
    outside = (rows - cols >= 4) | (cols > rows)  # the window's mask: the future and 4 or more back
    assert torch.isinf(sliding.masked[outside]).all() and torch.isfinite(sliding.masked[~outside]).all()
    assert torch.isfinite(full.masked[cols <= rows]).all()


def test_a_windowed_layer_without_its_mask_is_refused():
    config, model = _model(LAYERED)
    _, layer, head, q_rot, k_rot, v = _args(model, config, 0)
    with pytest.raises(ValueError, match="window of 4"):
        attention_steps(q_rot, k_rot, v, 0, n_groups=config.n_groups, layer=layer_attention(model, 0))


def _args(model, config, layer: int):
    tr = trace(model, random_ids(config, 13), ("q_rot", "k_rot", "v"), layers=[layer])
    return model, layer, 0, tr.get("q_rot", layer)[0], tr.get("k_rot", layer)[0], tr.get("v", layer)[0]
