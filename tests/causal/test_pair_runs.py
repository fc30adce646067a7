"""measure_pair makes the plain runs of both prompts once for every step (txviz.causal.pair_runs): its
numbers stay bit-equal to each step computed on its own the way it was before (each with its own runs and
a separate call for each logit difference), on tiny random models of every variant, and it makes the
forward passes txviz.causal.cost counts for it."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz.causal import cost, report
from txviz.causal.activations import run_with_activations
from txviz.causal.attribution import attribution_patching
from txviz.causal.dla import direct_logit_attribution
from txviz.causal.intervention import Replace
from txviz.causal.patching import clean_diff, head_variants, patch_heads, run_variants
from txviz.causal.shared_prefix import clean_run

N_TOKENS, CHANGED, ANSWER, WRONG = 9, 4, 3, 5


@pytest.fixture(params=sorted(VARIANTS), scope="module")
def model(request):
    return random_decoder(tiny_config(**VARIANTS[request.param]))


def pair(config):
    clean = random_ids(config, N_TOKENS, seed=2)[0]
    corrupt = clean.clone()
    corrupt[CHANGED] = (clean[CHANGED] + 1) % config.vocab_size
    return clean, corrupt


def each_step_alone(model, clean, corrupt) -> dict:
    """The steps as measure_pair ran them before sharing: each its own runs, every difference its own call."""
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    heads = run_with_activations(model, corrupt[None], ("head_out",))[1]
    residual = run_with_activations(model, corrupt[None], ("resid_pre",))[1]
    grid = [[Replace(layer, "resid_pre", position=t)] for layer in range(n_layers) for t in range(N_TOKENS)]
    return {
        "patching": run_variants(model, clean, head_variants(n_layers, n_heads), ANSWER, WRONG, source=heads)
        .view(n_layers, n_heads) - clean_diff(model, clean, ANSWER, WRONG),
        "ablation": run_variants(model, clean, head_variants(n_layers, n_heads, value="mean"), ANSWER, WRONG)
        .view(n_layers, n_heads) - clean_diff(model, clean, ANSWER, WRONG),
        "grid": run_variants(model, clean, grid, ANSWER, WRONG, source=residual).view(n_layers, N_TOKENS)
        - clean_diff(model, clean, ANSWER, WRONG),
        "attribution": attribution_patching(model, clean, corrupt, ANSWER, WRONG),
        "corrupt_diff": clean_diff(model, corrupt, ANSWER, WRONG),
        "dla": direct_logit_attribution(model, clean, ANSWER, WRONG),
    }


def test_the_shared_runs_change_no_number(model):
    clean, corrupt = pair(model.config)
    shared = report.measure_pair(model, clean, corrupt, ANSWER, WRONG, grid=True)
    alone = each_step_alone(model, clean, corrupt)
    for name in ("patching", "ablation", "grid", "attribution"):
        assert torch.equal(shared[name], alone[name]), name
    assert shared["corrupt_diff"] == alone["corrupt_diff"]
    assert vars(shared["dla"]).keys() == vars(alone["dla"]).keys()
    for name, value in vars(shared["dla"]).items():
        other = vars(alone["dla"])[name]
        assert torch.equal(value, other) if torch.is_tensor(value) else value == other, name


def test_a_plain_run_gives_the_logits_of_a_plain_call(model):
    """What the sharing rests on: recording points, keeping the keys, reading only the last logits change
    no bit of what a plain call computes (so its difference needs no call of its own)."""
    ids = pair(model.config)[0][None]
    with torch.no_grad():
        plain = model(ids, last_only=True)
    assert torch.equal(clean_run(model, ids, ("head_out", "resid_pre")).logits, plain)
    last, kept = run_with_activations(model, ids, ("head_out", "resid_pre"), last_only=True)
    full, every = run_with_activations(model, ids, ("head_out", "resid_pre"))
    assert torch.equal(last, plain) and last.shape[1] == 1 and full.shape[1] == N_TOKENS
    assert kept.keys() == every.keys() and all(torch.equal(kept[site], every[site]) for site in kept)


def test_a_clean_run_without_the_sources_points_is_refused():
    model = random_decoder(tiny_config())
    clean, corrupt = pair(model.config)
    with pytest.raises(ValueError, match="does not record the source's sites"):
        patch_heads(model, clean, corrupt, ANSWER, WRONG, clean=clean_run(model, clean[None], ("resid_pre",)))


def test_measure_pair_makes_the_passes_it_is_counted_for():
    model = random_decoder(tiny_config(n_kv_heads=2))
    clean, corrupt = pair(model.config)
    seen = [0]  # one per position per row each time a layer runs

    def count(_module, args, _out):
        seen[0] += args[0].shape[0] * args[0].shape[1]

    hooks = [layer.register_forward_hook(count) for layer in model.layers]
    try:
        report.measure_pair(model, clean, corrupt, ANSWER, WRONG, grid=True)
    finally:
        for hook in hooks:
            hook.remove()
    config = model.config
    passes = cost.pair_passes(config.n_layers, config.n_heads, clean, corrupt, grid=True, margins=False)
    backward = 1  # attribution patching's backward, counted as one pass, runs no layer's forward
    assert seen[0] == (passes - backward) * config.n_layers * N_TOKENS
