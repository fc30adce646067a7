"""EAP is the metric's derivative in each edge's patch fraction; EAP-IG integrates toward the exact effect."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.circuit_variants import CIRCUIT_VARIANTS
from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.circuit.eap import eap, eap_ig, ig_rows
from txviz.circuit.metric import LogitDiff, LogProb
from txviz.circuit.pair import CircuitPair
from txviz.circuit.patching import patched_metric


def _pair(variant: str, metric, dtype=torch.float32, **overrides) -> CircuitPair:
    model = random_decoder(tiny_config(**{**CIRCUIT_VARIANTS[variant], **overrides})).to(dtype)
    clean = random_ids(model.config, 9, seed=1)
    corrupt = clean.clone()
    corrupt[0, 2] = (clean[0, 2] + 5) % model.config.vocab_size
    return CircuitPair(model, clean, corrupt, metric)


# LayerNorm models, as RMSNorm computes in float32 whatever the dtype: GPT-2's, and OLMo 2's QK-norm across
# all heads as a LayerNorm in a pre-norm block (the post-norms' frozen scale is taken in float32)
LAYERNORM_VARIANTS = {"learned": dict(), "olmo2_layernorm": dict(norm="layernorm", pre_norm=True, sandwich_norm=False)}


@pytest.mark.parametrize("variant", sorted(LAYERNORM_VARIANTS))
@pytest.mark.parametrize("metric", [LogitDiff(3, 5), LogProb(7)], ids=["logit_diff", "log_prob"])
def test_eap_is_the_first_order_term_of_every_edge(metric, variant):
    """Central differences of the exactly patched metric in each edge's fraction ε, in float64, against
    the EAP score."""
    name = "olmo2_like" if variant == "olmo2_layernorm" else variant
    pair = _pair(name, metric, torch.float64, **LAYERNORM_VARIANTS[variant])
    scores = eap(pair)
    rows, cols = torch.nonzero(pair.graph.valid, as_tuple=True)
    n, h = len(rows), 1e-4
    patch = torch.zeros(2 * n, *pair.graph.valid.shape, dtype=torch.float64)
    patch[torch.arange(n), rows, cols] = h
    patch[n + torch.arange(n), rows, cols] = -h
    values = patched_metric(pair, patch, chunk=64)
    slopes = (values[:n] - values[n:]) / (2 * h)
    assert_close(scores[rows, cols].double(), slopes, atol=1e-6, rtol=1e-4)
    assert scores[~pair.graph.valid].abs().max() == 0
    assert scores[rows, cols].abs().max() > 1e-2


@pytest.mark.parametrize("variant", ["gqa", "gemma_like", "parallel", "olmoe_like"])
def test_eap_ig_with_one_step_is_eap(variant):
    pair = _pair(variant, LogitDiff(3, 5))
    assert_close(eap_ig(pair, steps=1), eap(pair))
    assert not torch.allclose(eap_ig(pair, steps=3), eap(pair))


def test_eap_ig_approaches_exact_patching_of_the_embeddings_as_steps_grow():
    """Patching every edge out of the embeddings exactly gives the corrupt run; the EAP-IG scores of
    those edges sum to that change ever more closely as the steps grow (integrated gradients'
    completeness), while EAP's sum misses it."""
    pair = _pair("gqa", LogitDiff(3, 5), torch.float64)
    embed_edges = torch.zeros(pair.graph.valid.shape, dtype=torch.bool)
    embed_edges[:, 0] = True
    exact = float(patched_metric(pair, embed_edges[None])[0]) - pair.clean_metric
    assert exact == pytest.approx(pair.corrupt_metric - pair.clean_metric, abs=1e-9)
    errors = {steps: abs(float(eap_ig(pair, steps, batch=8)[:, 0].sum()) - exact) for steps in (1, 4, 32)}
    assert errors[1] > 0.1 * abs(exact)
    assert errors[32] < errors[4] < errors[1]
    assert errors[32] < 0.02 * abs(exact)


def test_eap_ig_in_batches_is_eap_ig_at_once():
    pair = _pair("moe", LogitDiff(3, 5))
    assert_close(eap_ig(pair, 5, batch=2), eap_ig(pair, 5), atol=1e-6, rtol=1e-5)


def test_the_model_keeps_nothing():
    pair = _pair("mha", LogitDiff(3, 5))
    model = pair.model
    before = {name: t.clone() for name, t in model.state_dict().items()}
    attributes = set(vars(model))
    eap_ig(pair, 3)
    assert all(p.grad is None for p in model.parameters())
    assert set(vars(model)) == attributes
    assert all(torch.equal(before[name], t) for name, t in model.state_dict().items())


def test_longer_prompts_run_fewer_steps_at_once():
    """A SmolLM2-sized graph: the 24-token pair's five steps fit one backward, 64 tokens do not."""
    config = tiny_config(vocab_size=100, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, ffn_hidden=64)
    assert ig_rows(config, 24, 5) == 5
    assert 1 <= ig_rows(config, 64, 5) < 5
    assert ig_rows(config, 4096, 5) == 1
