"""The circuit service on a model whose QK-norm normalizes all heads' queries and keys together (OLMo 2,
OLMoE): it estimates, runs, and breaks down a score, as on any other model."""

from __future__ import annotations

import dataclasses

import pytest

from app.services.circuit import CircuitRequest, breakdown, estimate, run, work
from tests.helpers.tiny import random_decoder
from txviz import limits


@pytest.fixture(scope="module")
def across_heads(tiny):
    """The tiny zoo model's shape and tokenizer with OLMo 2's block: post-norms only, QK-norm across heads."""
    config = tiny.config.replace(qk_norm=True, qk_norm_scope="all_heads", pre_norm=False, sandwich_norm=True)
    return dataclasses.replace(tiny, model=random_decoder(config), config=config)


def test_a_qk_norm_across_all_heads_is_estimated_run_and_broken_down(across_heads):
    request = CircuitRequest("the cat sat on the mat", "the dog sat on the mat", "and", "the", "sink", steps=2)
    assert estimate(across_heads, request, limits.current()).seconds > 0
    result = run(across_heads, request, limits.current())
    scores, graph = result.result.scores, result.result.pair.graph
    assert graph.qk_norm_across_heads and scores[graph.valid].abs().max() > 0
    parts = breakdown(across_heads, result, 2, 1, len(result.clean_tokens) - 1, 1)
    assert parts.sum == pytest.approx(parts.score, abs=1e-5)


def test_the_estimate_counts_the_wider_projections_of_such_a_model(tiny, across_heads):
    """Every head's q and k inputs through every head's rows: more work than the same shape with no QK-norm."""
    request = CircuitRequest("the cat sat on the mat", "the dog sat on the mat", "and", "the", "sink")
    (n, across), (_, plain) = work(across_heads, request, limits.current()), work(tiny, request, limits.current())
    assert n == 7 and across > plain  # the sink token and six words
    assert estimate(across_heads, request, limits.current()).seconds > estimate(tiny, request, limits.current()).seconds
