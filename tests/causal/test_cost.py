"""The causal run's cost, counted before it runs (txviz.causal.cost), against the token-layers its forward
calls compute, counted by a hook on every layer of a tiny model while the sweep runs."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.causal import cost
from txviz.causal.patching import ablate_heads, patch_heads
from txviz.causal.residual import residual_grid

N_TOKENS = 10


@pytest.fixture(scope="module")
def model():
    return random_decoder(tiny_config())


@contextmanager
def token_layers(model):
    """Counts one per position per row each time a layer runs."""
    seen = [0]
    hooks = [layer.register_forward_hook(lambda _m, args, _out: seen.__setitem__(0, seen[0] + args[0].shape[0] * args[0].shape[1]))
             for layer in model.layers]
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


def counterfactual(config, changed: list[int]):
    clean = random_ids(config, N_TOKENS, seed=3)
    corrupt = clean.clone()
    for position in changed:
        corrupt[0, position] = (clean[0, position] + 1) % config.vocab_size
    return clean, corrupt


@pytest.mark.parametrize("changed", [[4], [2, 7], [0], [N_TOKENS - 1]])
@pytest.mark.parametrize("chunk_size", [3, 16])
def test_the_counted_token_layers_are_those_the_sweeps_run(model, changed, chunk_size):
    config = model.config
    full = config.n_layers * N_TOKENS  # one forward pass of one prompt
    clean, corrupt = counterfactual(config, changed)
    first = cost.first_difference(clean[0], corrupt[0])
    assert first == changed[0]
    runs = {
        "patching": (lambda: patch_heads(model, clean, corrupt, 3, 5, chunk_size=chunk_size),
                     cost.head_sweep(config.n_layers, config.n_heads, N_TOKENS, first, chunk_size)),
        "ablation": (lambda: ablate_heads(model, clean, 3, 5, value="mean", chunk_size=chunk_size),
                     cost.head_sweep(config.n_layers, config.n_heads, N_TOKENS, 0, chunk_size)),
        "grid": (lambda: residual_grid(model, clean, corrupt, 3, 5, chunk_size=chunk_size),
                 cost.grid_sweep(config.n_layers, clean[0], corrupt[0], chunk_size)),
    }
    for step, (run, counted) in runs.items():
        with token_layers(model) as seen:
            run()
        assert seen[0] == counted + cost.STEP_PASSES[step] * full, step


def test_the_sweeps_cost_less_the_later_the_prompts_part(model):
    """What the shared prefix saves: a counterfactual that parts at the last token costs a fraction of one
    that parts at the first (the old estimate counted both as full passes)."""
    config = model.config
    early = cost.pair_passes(config.n_layers, config.n_heads, *(ids[0] for ids in counterfactual(config, [0])), grid=True)
    late = cost.pair_passes(config.n_layers, config.n_heads, *(ids[0] for ids in counterfactual(config, [N_TOKENS - 1])),
                            grid=True)
    every_variant_full = 2 * config.n_layers * config.n_heads + config.n_layers * N_TOKENS
    assert late < early <= every_variant_full + sum(cost.STEP_PASSES.values())


def test_identical_prompts_need_no_patching_pass(model):
    clean = random_ids(model.config, N_TOKENS, seed=3)[0]
    assert cost.head_sweep(model.config.n_layers, model.config.n_heads, N_TOKENS, cost.first_difference(clean, clean)) == 0
    assert cost.grid_sweep(model.config.n_layers, clean, clean) == 0
