"""Per-layer KV sharing: a layer merged by ``merge_kv_heads`` computes exactly what that layer of
``to_kv_groups`` computes; merging every layer is ``to_kv_groups``; the sweep ranks layers and walks
the cheapest-first path with the right bytes."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.analysis.kv.sharing import (layer_sharing, layer_sharing_steps, merge_kv_heads, merged_kv_bytes_per_token,
                                       quality_vs_original, sweep_seconds, time_sweep_steps, to_kv_groups)
from txviz.model.kv_cache import kv_bytes_per_token


@pytest.fixture
def model():
    return random_decoder(tiny_config(n_layers=4, n_heads=8, n_kv_heads=4), seed=3)


def logits(model, ids):
    with torch.inference_mode():
        return model(ids)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_merging_every_layer_is_the_regrouped_model(model, n_kv_heads):
    ids = random_ids(model.config, 20)
    merged = merge_kv_heads(model, range(model.config.n_layers), n_kv_heads)
    assert merged.config == model.config  # same shapes: only the weights say the heads are shared
    assert_close(logits(merged, ids), logits(to_kv_groups(model, n_kv_heads), ids), rtol=1e-5, atol=1e-5)


def test_merging_no_layer_changes_nothing_and_shares_the_weights(model):
    ids = random_ids(model.config, 20)
    same = merge_kv_heads(model, [], 1)
    assert torch.equal(logits(same, ids), logits(model, ids))
    assert same.layers[0].attn.q_proj.weight.data_ptr() == model.layers[0].attn.q_proj.weight.data_ptr()


def test_one_merged_layer_reads_identical_kv_heads_and_leaves_the_others(model):
    merged = merge_kv_heads(model, [2], 1)
    d = model.config.head_dim
    k = merged.layers[2].attn.k_proj.weight.reshape(model.config.n_kv_heads, d, -1)
    assert all(torch.equal(k[0], k[h]) for h in range(1, k.shape[0]))  # every KV head is the mean
    assert_close(k[0], model.layers[2].attn.k_proj.weight.reshape(4, d, -1).double().mean(0).float())
    for layer in (0, 1, 3):
        assert torch.equal(merged.layers[layer].attn.k_proj.weight, model.layers[layer].attn.k_proj.weight)
    assert not torch.equal(model.layers[2].attn.k_proj.weight, merged.layers[2].attn.k_proj.weight)  # untouched


def test_bytes_per_token_of_a_mixed_design(model):
    config = model.config
    assert merged_kv_bytes_per_token(config, [], 1, 4) == kv_bytes_per_token(config, 4)
    everything = merged_kv_bytes_per_token(config, range(config.n_layers), 1, 4)
    assert everything == kv_bytes_per_token(config.replace(n_kv_heads=1), 4)
    assert merged_kv_bytes_per_token(config, [0, 0, 1], 2, 2) == 2 * (2 * 2 + 2 * 4) * config.head_dim * 2


def test_bad_requests_are_refused(model):
    with pytest.raises(ValueError, match="must divide"):
        merge_kv_heads(model, [0], 3)
    with pytest.raises(ValueError, match="out of range"):
        merge_kv_heads(model, [4], 1)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        layer_sharing(model, random_ids(model.config, 1))


def test_sweep_ranks_layers_and_walks_the_cheapest_first(model):
    ids = random_ids(model.config, 24)
    told = []
    sweep = layer_sharing(model, ids, 1, path_points=3, progress=lambda done, total: told.append((done, total)))
    config = model.config
    assert told[-1][0] == told[-1][1] == len(told) == 1 + config.n_layers + 3
    for layer in range(config.n_layers):  # each layer's figure is quality_vs_original of that layer alone
        report = quality_vs_original(model, merge_kv_heads(model, [layer], 1), ids)
        assert sweep.layer_kl[layer] == pytest.approx(report.mean_kl, rel=1e-4, abs=1e-7)
        assert sweep.layer_top1[layer] == pytest.approx(report.top1_agreement)
    assert [sweep.layer_kl[i] for i in sweep.order] == sorted(sweep.layer_kl)
    assert sweep.path_layers == [0, 2, 4]
    assert sweep.path_kl[0] == 0.0 and sweep.path_perplexity[0] == pytest.approx(sweep.perplexity_original)
    everything = quality_vs_original(model, to_kv_groups(model, 1), ids)
    assert sweep.path_kl[-1] == pytest.approx(everything.mean_kl, rel=1e-3)
    assert sweep.path_perplexity[-1] == pytest.approx(everything.perplexity_variant, rel=1e-4)
    assert sweep.path_kv_bytes_per_token == [merged_kv_bytes_per_token(config, sweep.order[:n], 1, 4)
                                             for n in (0, 2, 4)]
    assert sweep.path_kv_bytes_per_token[0] > sweep.path_kv_bytes_per_token[-1]


@pytest.mark.parametrize("path_points", [2, 3, 7])
def test_the_step_count_is_what_progress_reports(model, path_points):
    ids = random_ids(model.config, 12)
    reported = []
    layer_sharing(model, ids, 2, path_points=path_points, progress=lambda done, total: reported.append((done, total)))
    steps = layer_sharing_steps(model.config, path_points)
    assert reported == [(done, steps) for done in range(1, steps + 1)]


def test_the_longest_and_shortest_steps_are_timed_and_leave_the_model_alone(model):
    ids = random_ids(model.config, 12)
    before = logits(model, ids)
    first, last = time_sweep_steps(model, ids, 1)
    assert 0 < first < 60 and 0 < last < 60
    assert torch.equal(logits(model, ids), before)


def test_the_estimate_counts_the_layers_each_step_runs(model, monkeypatch):
    """``sweep_seconds`` assumes the original runs every layer, the step merging layer i runs the n − i
    layers from it on (linear between the timed first and last steps) and each path point at most all of
    them (the point that merges nothing runs none): the sweep's own calls, counted, are that."""
    from txviz.model.transformer import Decoder

    runs, real = [], Decoder._layers_on
    monkeypatch.setattr(Decoder, "_layers_on", lambda self, x, q_pos, first, *a, **k:
                        runs.append(len(self.layers) - first) or real(self, x, q_pos, first, *a, **k))
    layer_sharing(model, random_ids(model.config, 12), 2, path_points=3)
    n = model.config.n_layers
    original, per_layer, path = runs[0], runs[1:n + 1], runs[n + 1:]
    assert original == n and per_layer == [n - i for i in range(n)] and all(k <= n for k in path)
    assert len(runs) == layer_sharing_steps(model.config, 3) - 1
    first, last = 2.0, 0.5
    cost = lambda k: last + (first - last) * (k - 1) / (n - 1)  # noqa: E731
    assert sweep_seconds(model.config, first, last, 3) == pytest.approx(first + sum(map(cost, per_layer)) + first * len(path))
    assert sweep_seconds(model.config, 1.5, 1.5, 3) == pytest.approx(1.5 * (layer_sharing_steps(model.config, 3) - 1))


@pytest.mark.parametrize("config", [tiny_config(n_layers=4, n_heads=8, n_kv_heads=4),
                                    tiny_config(n_layers=5, n_heads=4, n_kv_heads=2, sliding_window=4,
                                                layer_types=("sliding", "sliding", "full", "sliding", "full"),
                                                rope_local_theta=1e4)], ids=["plain", "windows"])
def test_the_sweep_resumes_each_variant_with_the_figures_of_full_passes(config):
    """A variant starts at its first merged layer, from the original's residual there: each figure is the
    one a full pass of the merged model gives, to the bit (sliding windows and a local RoPE included)."""
    from txviz.analysis.kv.sharing import _compare, _log_probs

    model, ids = random_decoder(config, seed=5), random_ids(config, 12, batch=2)
    sweep = layer_sharing(model, ids, 1, path_points=4)
    logp_o = _log_probs(model, ids)
    for layer in range(config.n_layers):
        kl, top1, _ = _compare(logp_o, _log_probs(merge_kv_heads(model, [layer], 1), ids), ids)
        assert (sweep.layer_kl[layer], sweep.layer_top1[layer]) == (kl, top1), layer
    assert len(set(sweep.layer_kl)) == config.n_layers  # every layer's merge changes something of its own
    for count, kl, top1, ppl in zip(sweep.path_layers, sweep.path_kl, sweep.path_top1, sweep.path_perplexity):
        if count:
            merged = _log_probs(merge_kv_heads(model, sweep.order[:count], 1), ids)
            assert (kl, top1, ppl) == _compare(logp_o, merged, ids), count
