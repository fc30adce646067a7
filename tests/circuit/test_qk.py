"""The query–key breakdown: its pairs add up to the model's own score, its value parts to the head's output."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.circuit_variants import CIRCUIT_VARIANTS
from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.causal.activations import run_with_activations
from txviz.circuit.qk import qk_attribution


@pytest.mark.parametrize("variant", sorted(CIRCUIT_VARIANTS))
def test_the_pairs_sum_to_the_models_pre_softmax_score(variant):
    model = random_decoder(tiny_config(**CIRCUIT_VARIANTS[variant]))
    ids = random_ids(model.config, 11)
    logits = trace(model, ids, capture=("attn_logits",), layers=[1])["attn_logits"][0, 0]  # (H, T, S), capped
    for head, query, key in ((0, 10, 3), (3, 7, 7), (2, 5, 0)):
        breakdown = qk_attribution(model, ids, 1, head, query, key)
        model_score = float(logits[head, query, key])
        shown = breakdown.capped_score if breakdown.capped_score is not None else breakdown.score
        assert shown == pytest.approx(model_score, abs=1e-5)
        assert breakdown.sum == pytest.approx(breakdown.score, abs=1e-5)
        assert breakdown.pairs.shape == (len(breakdown.query_nodes), len(breakdown.key_nodes))
        assert breakdown.query_nodes[:6] == ("embed", "a0.h0", "a0.h1", "a0.h2", "a0.h3", "m0")
        assert (breakdown.pairs.abs() > 1e-4).sum() > 3  # many nodes take part: the sum is not one term


def test_a_soft_capped_score_is_split_before_the_cap():
    model = random_decoder(tiny_config(**{**CIRCUIT_VARIANTS["gemma_like"], "attn_softcap": 0.5}))
    breakdown = qk_attribution(model, random_ids(model.config, 8), 1, 1, 6, 2)
    assert breakdown.capped_score == pytest.approx(0.5 * torch.tanh(torch.tensor(breakdown.score / 0.5)).item(), abs=1e-6)
    assert abs(breakdown.capped_score - breakdown.sum) > 1e-3


@pytest.mark.parametrize("variant", ["gqa", "learned", "gemma_like"])
def test_the_value_parts_over_every_key_make_the_length_of_the_heads_output(variant):
    model = random_decoder(tiny_config(**CIRCUIT_VARIANTS[variant]))
    ids = random_ids(model.config, 9)
    layer, head, query = 1, 3, 8
    _, acts = run_with_activations(model, ids, ("head_out",))
    dim = model.config.head_dim
    written = acts[layer, "head_out"][0, head, query] @ model.layers[layer].attn.o_proj.weight[:, head * dim:(head + 1) * dim].T
    parts = [qk_attribution(model, ids, layer, head, query, key) for key in range(query + 1)]
    assert sum(float(p.value_parts.sum()) for p in parts) == pytest.approx(float(written.detach().norm()), abs=1e-5)
    assert sum(p.weight for p in parts) == pytest.approx(1.0, abs=1e-6)


def test_positions_the_mask_hides_are_refused():
    model = random_decoder(tiny_config())
    with pytest.raises(ValueError, match="masked"):
        qk_attribution(model, random_ids(model.config, 6), 1, 0, 2, 4)
