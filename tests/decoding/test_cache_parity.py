"""A cached decoding run and a full recompute give the same tokens and the same attention row at
every step (the query that produced the step, over every earlier position), on every kind of
model, a sliding window past its window included."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.decoding_reference import recomputed_run
from tests.helpers.tiny import FAMILY_VARIANTS, VARIANTS, random_decoder, tiny_config
from txviz.capture import trace
from txviz.decoding import StepRecordRequest, decode

PARITY_VARIANTS = {**{name: VARIANTS[name] for name in ("mha", "gqa", "mqa", "sliding_window", "alibi", "learned",
                                                        "moe", "no_positions")},
                   **{name: FAMILY_VARIANTS[name] for name in ("gemma2_like", "gemma3_capped", "gemma_sandwich_capped",
                                                               "gpt_oss_like")},
                   "sliding_and_full": dict(n_kv_heads=2, n_layers=3, sliding_window=4,
                                            layer_types=("sliding", "full", "sliding"), rope_local_theta=100.0)}
PROMPT = [7, 31, 2, 64]


@pytest.mark.parametrize("variant", sorted(PARITY_VARIANTS))
def test_cached_steps_equal_a_full_recompute(variant):
    config = tiny_config(**PARITY_VARIANTS[variant])
    model = random_decoder(config)
    run = decode(model, PROMPT, 14, record=StepRecordRequest(attention_layers=tuple(range(config.n_layers))))
    tokens, _, _ = recomputed_run(model, PROMPT, 14)
    assert list(run.new_ids) == tokens
    for step in run.steps:
        full = trace(model, torch.tensor([run.ids[:step.position]]), capture=("attn_probs",))
        for layer in range(config.n_layers):
            expected = torch.stack([full.attn(layer, head)[step.query_position] for head in range(config.n_heads)])
            assert step.attention[layer].shape == (config.n_heads, step.position)
            assert_close(step.attention[layer], expected, rtol=0, atol=1e-5)


def test_a_sliding_row_past_the_window_weighs_only_the_window():
    config = tiny_config(**VARIANTS["sliding_window"])  # a window of 5 tokens, 4 prompt tokens + 12 new
    run = decode(random_decoder(config), PROMPT, 12, record=StepRecordRequest(attention_layers=(0, 1)))
    late = run.steps[-1]
    assert late.position - 5 > 0
    for row in late.attention.values():
        assert torch.all(row[:, :late.position - 5] == 0)
        assert torch.all(row[:, late.position - 5:] > 0)
        assert_close(row.sum(dim=-1), torch.ones(config.n_heads))


def test_only_the_asked_layers_and_heads_are_kept():
    config = tiny_config(n_layers=3, n_kv_heads=2)
    model = random_decoder(config)
    every = decode(model, PROMPT, 6, record=StepRecordRequest(attention_layers=(0, 1, 2)))
    some = decode(model, PROMPT, 6, record=StepRecordRequest(attention_layers=(2, 0), attention_heads=(3, 1)))
    none = decode(model, PROMPT, 6)
    for all_heads, asked, plain in zip(every.steps, some.steps, none.steps):
        assert sorted(asked.attention) == [0, 2] and plain.attention == {}
        for layer in (0, 2):
            assert_close(asked.attention[layer], all_heads.attention[layer][[1, 3]], rtol=0, atol=1e-6)
