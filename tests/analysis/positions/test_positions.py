"""The summaries the Positions page shows, computed by txviz.analysis.positions.measured: the smoothed loss
curves and their table, the attention a model attends with, the bias map with the future left blank,
how diluted no-position attention is, and the permutation check's rows."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from txviz.analysis.positions import measured as pos


@pytest.mark.parametrize("n,window", [(40, 8), (100, 16), (9, 9)])
def test_the_moving_average_is_numpy_valid_convolution(n, window):
    values = np.random.default_rng(0).normal(size=n)
    expected = np.convolve(values, np.ones(window) / window, mode="valid")
    np.testing.assert_allclose(pos.moving_average(values, window).numpy(), expected, atol=1e-12)


def test_a_window_longer_than_the_curve_gives_no_point():
    assert len(pos.moving_average(np.ones(5), 8)) == 0


def test_the_smoothing_window_is_a_sixteenth_and_at_least_eight():
    assert [pos.smoothing_window(n) for n in (10, 128, 511, 2048)] == [8, 8, 31, 128]


def test_the_loss_table_has_the_mean_and_its_perplexity_per_scaling():
    table = pos.loss_summary({"none": np.array([1.0, 3.0]), "linear": np.array([0.5, 0.5])})
    assert table["scaling"] == ["none", "linear"]
    assert table["mean loss (nats)"] == [2.0, 0.5]
    assert table["perplexity"] == pytest.approx([math.exp(2.0), math.exp(0.5)])


def test_attention_probs_are_a_softmax_that_keeps_the_mask():
    scores = torch.tensor([[0.0, float("-inf")], [1.0, 2.0]], dtype=torch.bfloat16)
    probs = pos.attention_probs(scores)
    assert probs.dtype == torch.float32
    assert_close(probs.sum(-1), torch.ones(2))
    assert probs[0, 1] == 0 and probs[1, 1] > probs[1, 0]


def test_with_a_learned_sink_the_maps_are_the_models_own():
    """gpt-oss: the captured scores of a head, softmaxed with its sink, are the captured map (rows < 1); a
    zero bias changes nothing."""
    from tests.helpers.tiny import FAMILY_VARIANTS, random_decoder, random_ids, tiny_config
    from txviz.capture.trace import trace
    from txviz.model.sinks import head_sink

    model = random_decoder(tiny_config(**FAMILY_VARIANTS["gpt_oss_like"]))
    with torch.no_grad():
        model.layers[1].attn.sinks.copy_(torch.linspace(-1.0, 2.0, 4))
    tr = trace(model, random_ids(model.config, 9), capture=["attn_scores", "attn_probs"])
    for head in range(4):
        scores, sink = tr.get("attn_scores", 1)[0, head], head_sink(model, 1, head)
        assert_close(pos.attention_probs(scores, sink), tr.get("attn_probs", 1)[0, head], rtol=0, atol=1e-6)
        assert_close(pos.with_bias(scores, torch.zeros_like(scores), sink), tr.get("attn_probs", 1)[0, head],
                     rtol=0, atol=1e-6)
    assert head_sink(random_decoder(tiny_config()), 0, 0) is None


def test_the_bias_map_blanks_the_future_and_keeps_the_rest():
    bias = pos.alibi_bias_matrix(2, 4)[1]  # (T, T), −inf above the diagonal
    shown = pos.hide_future(bias)
    future = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    assert shown[future].isnan().all()
    assert_close(shown[~future], bias[~future])
    cached = pos.hide_future(torch.zeros(2, 3))  # 2 queries after 1 cached key: the last key is the future of row 0
    assert cached[0, 2].isnan() and not cached[1].isnan().any()


def test_entropy_share_is_one_for_even_attention_and_less_for_a_peaked_head():
    n = 6
    even = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    peaked = torch.eye(n)
    entropy = pos.row_entropy(torch.stack([even, peaked]))  # (H=2, T)
    share = pos.entropy_share(entropy)
    assert share[0].item() == pytest.approx(1.0, abs=1e-5) and share[1].item() == pytest.approx(0.0, abs=1e-6)


def test_pairs_beyond_the_context_never_turn_in_it():
    waves = pos.wavelengths(torch.tensor([1.0, 0.1, 0.001]))  # 2π, 20π, 2000π tokens per turn
    assert pos.pairs_beyond(waves, 100) == 1 and pos.pairs_beyond(waves, 10) == 2


def test_permutation_rows_give_the_largest_gap_between_the_sorted_sets():
    same = torch.tensor([1.0, 2.0, 3.0])
    checks = {"positions removed": (same, same.clone(), torch.tensor([2, 0, 1])),
              "with the model's positions": (same, torch.tensor([1.0, 2.5, 3.0]), torch.tensor([2, 0, 1]))}
    rows = pos.permutation_rows(checks)
    assert [r["model"] for r in rows] == list(checks)
    assert [r["max |Δ| between sorted score sets"] for r in rows] == [0.0, 0.5]
