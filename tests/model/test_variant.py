"""with_parameters: a variant equal to a Decoder built from the changed state dict, sharing every other
tensor and module with the original, which it never changes."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.model.transformer import Decoder
from txviz.model.variant import with_parameters


@pytest.fixture(params=[dict(tie_embeddings=True), dict(qkv_bias=True)], ids=["tied", "bias-untied"])
def model(request):
    return random_decoder(tiny_config(n_layers=3, n_heads=4, n_kv_heads=2, **request.param), seed=5)


def logits(model, ids):
    with torch.inference_mode():
        return model(ids)


def changes(model):
    gen = torch.Generator().manual_seed(9)
    names = [n for n, _ in model.named_parameters() if n.startswith("layers.1.attn.") or n == "final_norm.weight"]
    return {n: torch.randn(p.shape, generator=gen) for n, p in model.named_parameters() if n in names}


def test_the_variant_computes_what_a_decoder_built_from_the_changed_state_computes(model):
    ids = random_ids(model.config, 12)
    before = logits(model, ids)
    new = changes(model)
    variant = with_parameters(model, new)
    state = {**{k: v.clone() for k, v in model.state_dict().items()}, **new}
    assert torch.equal(logits(variant, ids), logits(Decoder.from_state_dict(model.config, state), ids))
    assert torch.equal(logits(model, ids), before)  # the original computes what it did
    assert not torch.equal(logits(variant, ids), before)


def test_only_the_changed_tensors_and_the_modules_holding_them_are_new(model):
    new = changes(model)
    variant = with_parameters(model, new)
    ours, theirs = dict(variant.named_parameters()), dict(model.named_parameters())
    assert ours.keys() == theirs.keys()
    for name in ours:
        if name in new:
            assert torch.equal(ours[name], new[name]) and not torch.equal(theirs[name], new[name])
        else:
            assert ours[name] is theirs[name]
    assert variant.layers[0] is model.layers[0] and variant.layers[2] is model.layers[2]
    assert variant.layers[1].ffn is model.layers[1].ffn
    assert variant.layers[1] is not model.layers[1] and variant.layers[1].attn is not model.layers[1].attn
    assert variant.final_norm is not model.final_norm and variant.layers is not model.layers


def test_a_hook_on_the_variant_is_not_a_hook_on_the_original(model):
    variant = with_parameters(model, changes(model))
    seen = []
    variant.layers[1].attn.register_forward_hook(lambda *args: seen.append(1))
    variant.register_forward_pre_hook(lambda *args: seen.append(0))
    ids = random_ids(model.config, 6)
    logits(model, ids)
    assert seen == []
    logits(variant, ids)
    assert seen == [0, 1]


def test_names_and_shapes_are_checked(model):
    with pytest.raises(KeyError, match="not a parameter"):
        with_parameters(model, {"layers.1.attn.nothing.weight": torch.zeros(1)})
    weight = model.layers[0].attn.k_proj.weight
    with pytest.raises(ValueError, match="does not match"):
        with_parameters(model, {"layers.0.attn.k_proj.weight": torch.zeros(weight.shape[0] + 1, weight.shape[1])})
