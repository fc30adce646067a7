"""Interventions through the edit seam, on tiny random models of every variant: an empty one changes
nothing, patching everything a position's logits depend on reproduces the corrupt run, batched variants
equal one-by-one runs, and each replacement value does what it says."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz.causal.activations import ActivationRecorder, run_with_activations
from txviz.causal.intervention import Intervention, Replace
from txviz.causal.patching import ablate_heads, head_variants, patch_heads, run_variants
from txviz.causal.shared_prefix import clean_run

N_TOKENS = 10
CHANGED = 4  # the corrupt prompt differs from the clean one at this position only


def pair(config):
    clean = random_ids(config, N_TOKENS, seed=1)
    corrupt = clean.clone()
    corrupt[0, CHANGED] = (clean[0, CHANGED] + 1) % config.vocab_size
    return clean, corrupt


@pytest.fixture(params=sorted(VARIANTS), scope="module")
def model(request):
    return random_decoder(tiny_config(**VARIANTS[request.param]))


def every(model, points):
    return [Replace(layer, point) for layer in range(model.config.n_layers) for point in points]


def test_an_empty_intervention_changes_nothing(model):
    ids = random_ids(model.config, N_TOKENS, batch=3)
    with torch.no_grad():
        assert torch.equal(model(ids, record=Intervention([[], [], []])), model(ids))


def test_patching_the_last_residual_everywhere_gives_the_corrupt_logits(model):
    clean, corrupt = pair(model.config)
    corrupt_logits, source = run_with_activations(model, corrupt, ("resid_post", "resid_pre"))
    last = model.config.n_layers - 1
    for replace in (Replace(last, "resid_post"), Replace(last, "resid_pre")):
        with torch.no_grad():
            patched = model(clean, record=Intervention([[replace]], source))
        assert_close(patched, corrupt_logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("points", [("head_out", "ffn_out"), ("q", "k", "v", "ffn_out")])
def test_patching_every_head_and_ffn_reproduces_the_corrupt_run_where_the_embeddings_agree(model, points):
    """Only the embedding at CHANGED stays clean: every other position's residual is then the corrupt
    run's sum of parts, so its logits are the corrupt ones; at CHANGED they are not."""
    clean, corrupt = pair(model.config)
    corrupt_logits, source = run_with_activations(model, corrupt, points)
    with torch.no_grad():
        patched = model(clean, record=Intervention([every(model, points)], source))
        clean_logits = model(clean)
    same = [t for t in range(N_TOKENS) if t != CHANGED]
    assert_close(patched[:, same], corrupt_logits[:, same], rtol=0, atol=1e-4)
    assert not torch.allclose(patched[:, CHANGED], corrupt_logits[:, CHANGED], atol=1e-3)
    assert not torch.allclose(patched[:, -1], clean_logits[:, -1], atol=1e-3)  # the patch did something


def test_batched_variants_equal_one_by_one(model):
    clean, corrupt = pair(model.config)
    _, source = run_with_activations(model, corrupt, ("head_out",))
    variants = head_variants(model.config.n_layers, model.config.n_heads) + [[Replace(0, "head_out", 1, 3, "zero")]]
    batched = run_variants(model, clean, variants, 3, 5, source=source, chunk_size=64)
    single = run_variants(model, clean, variants, 3, 5, source=source, chunk_size=1)
    assert_close(batched, single, rtol=0, atol=1e-5)
    chunked = run_variants(model, clean, variants, 3, 5, source=source, chunk_size=3)
    assert_close(chunked, single, rtol=0, atol=1e-5)


def test_resuming_at_any_layer_from_the_plain_runs_residual_gives_the_plain_logits(model):
    """Decoder.resume skips the layers before ``layer``: given the residual a plain call had there, the
    logits are the plain call's (every position scheme, windows, MoE; layer n_layers: only the head)."""
    ids = random_ids(model.config, N_TOKENS, batch=2)
    keeper = clean_run(model, ids).entering  # the residual entering every layer, of one plain call
    with torch.no_grad():
        plain = model(ids)
        for layer in range(model.config.n_layers + 1):
            assert_close(model.resume(keeper[layer], layer), plain, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="outside"):
        model.resume(keeper[0], model.config.n_layers + 1)
    with pytest.raises(ValueError, match="residual must be"):
        model.resume(keeper[0][..., :-1], 0)


def test_variants_resumed_after_their_unedited_layers_equal_full_runs(model):
    """run_variants computes the unedited prefix once: each variant still gets what a full call with its
    intervention gives, whichever layer a chunk starts at (late-layer-first order, mixed points)."""
    clean, corrupt = pair(model.config)
    _, source = run_with_activations(model, corrupt, ("head_out", "resid_pre", "ffn_out"))
    last = model.config.n_layers - 1
    variants = [[Replace(last, "ffn_out")], [Replace(last, "head_out", 0)], [],
                [Replace(1, "resid_pre", position=CHANGED)], [Replace(0, "head_out", 1, value="mean")]]
    resumed = run_variants(model, clean, variants, 3, 5, source=source, chunk_size=2)
    with torch.no_grad():
        full = model(clean.expand(len(variants), -1), record=Intervention(variants, source), last_only=True)
    assert_close(resumed, (full[:, -1, 3] - full[:, -1, 5]).float(), rtol=0, atol=1e-5)


def test_variants_run_after_the_shared_prefix_equal_full_runs(model):
    """A counterfactual that agrees with the clean prompt before CHANGED: run_variants runs each chunk
    only on positions CHANGED.. with the clean run's keys before them (txviz.causal.shared_prefix), and
    drops the replacements that write the clean value; each variant still gets what a full call gives."""
    from txviz.causal.shared_prefix import clean_run, shared_positions

    clean, corrupt = pair(model.config)
    points = ("head_out", "q", "k", "v", "resid_pre")
    _, source = run_with_activations(model, corrupt, points)
    last = model.config.n_layers - 1
    variants = ([[Replace(layer, point, head=0)] for layer in range(last + 1) for point in ("q", "k", "v")]
                + [[Replace(last, "head_out", 1)], [Replace(1, "resid_pre", position=CHANGED + 2)],
                   [Replace(last, "resid_pre", position=N_TOKENS - 1)],
                   [Replace(0, "resid_pre", position=CHANGED - 1)], [Replace(1, "head_out", 2, CHANGED + 1, "zero")]])
    assert shared_positions(variants[:-2], source, clean_run(model, clean, points).activations, N_TOKENS) == CHANGED
    fast = run_variants(model, clean, variants, 3, 5, source=source, chunk_size=4)
    with torch.no_grad():
        full = model(clean.expand(len(variants), -1), record=Intervention(variants, source))[:, -1]
    assert_close(fast, (full[:, 3] - full[:, 5]).float(), rtol=0, atol=1e-5)
    assert fast[-2] == run_variants(model, clean, [[]], 3, 5)[0]  # the same value: nothing to run


def test_zero_ablating_a_layers_heads_is_zeroing_its_output_projection():
    model = random_decoder(tiny_config(**VARIANTS["learned"]))  # o_proj has a bias, which stays
    ids = random_ids(model.config, N_TOKENS)
    reference = copy.deepcopy(model)
    with torch.no_grad():
        reference.layers[1].attn.o_proj.weight.zero_()
        ablated = model(ids, record=Intervention([[Replace(1, "head_out", value="zero")]]))
        assert_close(ablated, reference(ids), rtol=0, atol=1e-5)


def test_mean_ablation_puts_the_heads_mean_over_positions_at_every_position():
    model = random_decoder(tiny_config(**VARIANTS["gqa"]))
    ids = random_ids(model.config, N_TOKENS)
    _, clean = run_with_activations(model, ids, ("head_out",))
    seen = ActivationRecorder(("head_out",))
    with torch.no_grad():
        model(ids, record=Intervention([[Replace(0, "head_out", head=2, value="mean")]], inner=seen))
    edited = seen.activations[0, "head_out"][0]  # (H, T, D), as the layer continued with it
    mean = clean[0, "head_out"][0, 2].mean(dim=0)
    assert_close(edited[2], mean.expand_as(edited[2]))
    assert torch.equal(edited[[0, 1, 3]], clean[0, "head_out"][0, [0, 1, 3]])


def test_patching_from_an_identical_prompt_changes_nothing_and_from_another_it_does():
    model = random_decoder(tiny_config(**VARIANTS["mha"]))
    clean, corrupt = pair(model.config)
    assert_close(patch_heads(model, clean, clean, 3, 5), torch.zeros(2, 4), rtol=0, atol=1e-5)  # batch-size rounding
    for point, n_heads in (("head_out", 4), ("q", 4), ("v", 4)):
        effect = patch_heads(model, clean, corrupt, 3, 5, point=point)
        assert effect.shape == (2, n_heads) and effect.abs().max() > 1e-4
    gqa = random_decoder(tiny_config(**VARIANTS["gqa"]))
    assert patch_heads(gqa, *pair(gqa.config), 3, 5, point="k").shape == (2, 2)  # the KV heads


def test_resample_ablation_is_patching_from_the_source_prompt():
    model = random_decoder(tiny_config(**VARIANTS["mha"]))
    clean, corrupt = pair(model.config)
    assert_close(ablate_heads(model, clean, 3, 5, value="source", source_ids=corrupt),
                 patch_heads(model, clean, corrupt, 3, 5))


def test_clear_errors():
    model = random_decoder(tiny_config(**VARIANTS["mha"]))
    clean = random_ids(model.config, N_TOKENS)
    with pytest.raises(ValueError, match="same token length"):
        patch_heads(model, clean, random_ids(model.config, N_TOKENS + 1), 3, 5)
    with pytest.raises(ValueError, match="no heads"):
        Replace(0, "resid_pre", head=1)
    with pytest.raises(ValueError, match="unknown edit points"):
        Replace(0, "attn_probs")
    with pytest.raises(ValueError, match="source run"):
        run_variants(model, clean, [[Replace(0, "head_out", 0)]], 3, 5)
