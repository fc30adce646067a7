"""Attribution patching: the gradient estimate against exact patching, and the agreement figures."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz.causal.attribution import agreement, attribution_patching
from txviz.causal.patching import patch_heads


def test_agreement_figures():
    grid = torch.tensor([[3.0, -1.0, 0.5], [0.0, 2.0, -4.0]])
    same = agreement(grid, 2 * grid, k=2)
    assert same["pearson"] == pytest.approx(1.0) and same["spearman"] == pytest.approx(1.0)
    assert same["top_k_overlap"] == 1.0
    reversed_ = agreement(grid, -grid.flatten().argsort().argsort().float().view(2, 3), k=2)
    assert reversed_["spearman"] == pytest.approx(-1.0)
    assert agreement(grid, torch.ones(2, 3))["pearson"] is None  # a constant grid has no correlation


def test_the_estimate_follows_exact_patching_on_a_token_swap():
    """For a one-token swap on a random model the first-order estimate ranks the heads as exact
    patching does; patching from the clean run itself is estimated as no change at all."""
    model = random_decoder(tiny_config(**VARIANTS["gqa"]))
    clean = random_ids(model.config, 10, seed=1)
    corrupt = clean.clone()
    corrupt[0, 4] = (clean[0, 4] + 1) % model.config.vocab_size
    estimate = attribution_patching(model, clean, corrupt, 3, 5)
    exact = patch_heads(model, clean, corrupt, 3, 5)
    assert estimate.shape == exact.shape == (2, 4)
    figures = agreement(estimate, exact, k=3)
    assert figures["pearson"] > 0.9 and figures["top_k_overlap"] >= 2 / 3
    assert_close(attribution_patching(model, clean, clean, 3, 5), torch.zeros(2, 4))


def test_the_model_keeps_no_gradient_state():
    model = random_decoder(tiny_config(**VARIANTS["mha"]))
    clean, corrupt = random_ids(model.config, 8, seed=1), random_ids(model.config, 8, seed=2)
    attribution_patching(model, clean, corrupt, 3, 5)
    assert all(p.grad is None for p in model.parameters())
