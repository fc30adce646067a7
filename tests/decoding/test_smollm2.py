"""On SmolLM2 (the default model): a cached decoding run equals a full recompute (tokens and the
step's attention rows), its candidates read as text, and a branch equals a run from scratch."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from txviz.capture import trace
from txviz.decoding import StepRecordRequest, branch, decode

pytestmark = pytest.mark.default_model
LAYERS = (0, 14, 29)


def test_smollm2_cached_steps_equal_a_full_recompute_and_branch(default_model):
    model, tokenizer = default_model.model, default_model.tokenizer
    prompt = tokenizer.encode("The capital of France is").ids
    record = StepRecordRequest(candidates=5, attention_layers=LAYERS)
    run = decode(model, prompt, 6, record=record, token_text=lambda token: tokenizer.decode([token]))
    for step in run.steps:
        full = trace(model, torch.tensor([run.ids[:step.position]]), capture=("attn_probs", "logits"), layers=LAYERS)
        assert step.token.id == int(full["logits"][0, -1].argmax())
        for layer in LAYERS:
            expected = torch.stack([full.attn(layer, head)[-1] for head in range(model.config.n_heads)])
            assert_close(step.attention[layer], expected, rtol=0, atol=1e-5)
    assert run.steps[0].candidates[0].text == tokenizer.decode([run.new_ids[0]])
    forked = branch(model, run, 2, run.steps[2].candidates[1].id)
    scratch = decode(model, list(forked.ids[:len(prompt) + 3]), 3, record=record)
    assert forked.new_ids[3:] == scratch.new_ids and forked.reused_tokens == len(prompt) + 2
