"""Head metrics, detectors, the step-by-step recomputation, the block walkthrough and the logit lens."""

from __future__ import annotations

import math

import pytest
import torch

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.analysis.block import block_walkthrough, logit_lens
from txviz.analysis.heads.detectors import induction_scores, offset_pattern, repeated_random_tokens, token_pattern
from txviz.analysis.heads.metrics import (duplicate_pattern, head_metrics, head_table, hide_sink, induction_pattern,
                                  pattern_score)
from txviz.analysis.heads.steps import attention_steps
from txviz.capture.trace import trace


def one_hot_probs(t: int, target) -> torch.Tensor:
    """(1, 1, T, T) rows putting all weight on key target(i)."""
    probs = torch.zeros(1, 1, t, t)
    for i in range(t):
        probs[0, 0, i, target(i)] = 1.0
    return probs


def test_previous_token_head_scores_one_and_sink_scores_zero():
    ids = torch.arange(6)
    metrics = head_metrics(one_hot_probs(6, lambda i: max(i - 1, 0)), ids)
    assert metrics["prev_token"].item() == pytest.approx(1.0)
    assert metrics["first_token_mass"].item() == pytest.approx(1 / 5)  # only row 1's previous token is token 0
    assert metrics["entropy"].item() == pytest.approx(0.0)
    assert metrics["max_weight"].item() == pytest.approx(1.0)


def test_uniform_head_entropy_is_log_of_visible_keys():
    t = 5
    probs = torch.tril(torch.ones(t, t))
    probs = (probs / probs.sum(-1, keepdim=True))[None, None]
    metrics = head_metrics(probs, torch.arange(t))
    expected = sum(math.log(i + 1) for i in range(1, t)) / (t - 1)
    assert metrics["entropy"].item() == pytest.approx(expected, rel=1e-5)


def test_duplicate_and_induction_patterns_on_a_repeated_sequence():
    ids = torch.tensor([5, 6, 7, 5, 6, 7])
    dup = duplicate_pattern(ids)
    assert dup[3, 0] and dup[4, 1] and dup[5, 2] and dup.sum() == 3
    ind = induction_pattern(ids)
    assert ind[3, 1] and ind[4, 2] and ind[5, 3] and ind.sum() == 3
    induction_head = one_hot_probs(6, lambda i: i - 2 if i >= 3 else 0)
    assert head_metrics(induction_head, ids)["induction"].item() == pytest.approx(1.0)
    assert head_metrics(induction_head, ids)["duplicate_token"].item() == pytest.approx(0.0)


def test_pattern_score_is_nan_when_pattern_is_empty():
    assert math.isnan(pattern_score(torch.rand(1, 1, 4, 4), torch.zeros(4, 4, dtype=torch.bool)).item())


def test_hide_sink_renormalizes_rows_without_the_first_key():
    probs = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.6, 0.2, 0.2]])
    shown = hide_sink(probs)
    torch.testing.assert_close(shown[2], torch.tensor([0.0, 0.5, 0.5]))
    torch.testing.assert_close(shown[1], torch.tensor([0.0, 1.0, 0.0]))
    assert shown[0].sum() == 0


def test_head_table_covers_every_head_once():
    config = tiny_config(n_kv_heads=2)
    model = random_decoder(config)
    ids = random_ids(config, 9)
    tr = trace(model, ids)
    table = head_table(tr["attn_probs"][:, 0], ids[0], tr.layers)
    assert {(r["layer"], r["head"]) for r in table} == {(l, h) for l in range(2) for h in range(4)}
    assert all(0 <= r["first_token_mass"] <= 1 for r in table)


@pytest.mark.parametrize("variant", [dict(), dict(n_kv_heads=2), dict(n_kv_heads=1)])
def test_step_by_step_equals_the_captured_probabilities(variant):
    config = tiny_config(**variant)
    model = random_decoder(config)
    tr = trace(model, random_ids(config, 11), ("q_rot", "k_rot", "v", "attn_probs", "attn_logits"), layers=[1])
    for head in range(config.n_heads):
        steps = attention_steps(tr.get("q_rot", 1)[0], tr.get("k_rot", 1)[0], tr.get("v", 1)[0], head,
                                n_groups=config.n_groups)
        torch.testing.assert_close(steps.probs, tr.attn(1, head))
        torch.testing.assert_close(steps.scaled, tr.get("attn_logits", 1)[0, head])
        assert torch.isinf(steps.masked.triu(1)[steps.masked.triu(1) != 0]).all()
        # without the 1/√d scaling the softmax is sharper (lower entropy) on average
        assert steps.unscaled_probs.max(-1).values.mean() >= steps.probs.max(-1).values.mean()


@pytest.mark.parametrize("variant", [dict(), dict(n_experts=4, top_k=2), dict(norm="layernorm", ffn="gelu_mlp")])
def test_block_walkthrough_reproduces_the_layer_output(variant):
    config = tiny_config(**variant)
    model = random_decoder(config)
    tr = trace(model, random_ids(config, 7), ("resid",))
    for layer in range(config.n_layers):
        steps, output = block_walkthrough(model, tr["resid"][layer, 0], layer)
        torch.testing.assert_close(output, tr["resid"][layer + 1, 0])
        assert all(step.shape == (7, config.d_model) for step in steps)


def test_logit_lens_last_row_is_the_model_prediction():
    config = tiny_config()
    model = random_decoder(config)
    ids = random_ids(config, 6)
    tr = trace(model, ids, ("resid", "logits"))
    probs, top_ids = logit_lens(model, tr["resid"][:, 0, -1], top=3)
    assert probs.shape == (config.n_layers + 1, 3)
    assert int(top_ids[-1, 0]) == int(tr["logits"][0, -1].argmax())
    torch.testing.assert_close(probs[-1, 0], tr["logits"][0, -1].softmax(-1).max())


def test_repeated_random_tokens_and_induction_scores_shape():
    ids = repeated_random_tokens(50, 10, seed=1, prefix=(0,), avoid=(0, 1))
    assert len(ids) == 21 and ids[0] == 0
    torch.testing.assert_close(ids[1:11], ids[11:])
    assert len(set(ids[1:11].tolist())) == 10 and not {0, 1} & set(ids[1:].tolist())
    config = tiny_config()
    scores = induction_scores(random_decoder(config), 10, prefix=(0,))
    assert scores.shape == (config.n_layers, config.n_heads) and ((scores >= 0) & (scores <= 1)).all()


def test_user_patterns():
    assert offset_pattern(4, 0).equal(torch.eye(4, dtype=torch.bool))
    pattern = token_pattern(["a", " b", "c", " b"], "b")
    assert pattern[1, 1] and pattern[3, 1] and pattern[3, 3] and not pattern[0, 1] and not pattern[2, 3]


def test_trace_json_round_trips():
    import json

    from txviz.analysis.heads.export import trace_json

    probs = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
    doc = json.loads(trace_json(model="m", prompt="ab", bos="none", ids=[3, 4], tokens=["a", "b"],
                                offsets=[(0, 1), (1, 2)], head_rows=[{"layer": 0, "head": 1}], maps={(0, 1): probs}))
    assert doc["tokens"][1] == {"index": 1, "id": 4, "text": "b", "start": 1, "end": 2}
    assert doc["attention"][0]["weights"] == [[1.0, 0.0], [0.25, 0.75]]
