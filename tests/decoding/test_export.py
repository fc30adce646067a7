"""A decoding run as JSON: each step's fields are its record's, and what was not asked for is absent."""

from __future__ import annotations

import json

from tests.helpers.tiny import random_decoder, tiny_config
from txviz.decoding import StepRecordRequest, decode
from txviz.decoding.export import steps_json
from txviz.generate import Sampling

PROMPT = [7, 31, 2]


def test_steps_as_json_carry_the_record():
    model = random_decoder(tiny_config(n_layers=3))
    record = StepRecordRequest(candidates=4, lens=True, attention_layers=(1,), attention_heads=(2, 0))
    run = decode(model, PROMPT, 5, sampling=Sampling(temperature=1.0, top_k=3, seed=1), record=record,
                 token_text=lambda token: f"t{token}")
    steps = json.loads(json.dumps(steps_json(run)))
    assert [s["id"] for s in steps] == list(run.new_ids)
    for data, step in zip(steps, run.steps):
        assert [c["id"] for c in data["candidates"]] == [c.id for c in step.candidates]
        assert [c["prob_sampled"] for c in data["candidates"]] == [c.prob_sampled for c in step.candidates]
        assert sum(c["prob_sampled"] for c in data["candidates"]) == sum(c.prob_sampled for c in step.candidates)
        assert data["text"] == f"t{step.token.id}" and data["kv_bytes"] == step.kv_bytes
        assert data["first_top1_layer"] == step.lens.first_top1_layer and data["lens_ranks"] == list(step.lens.ranks)
        (row,) = data["attention"]
        assert row["layer"] == 1 and row["heads"] == [0, 2] and row["weights"] == step.attention[1].tolist()


def test_what_was_not_asked_for_is_absent():
    (data,) = steps_json(decode(random_decoder(tiny_config()), PROMPT, 1))
    assert "first_top1_layer" not in data and "attention" not in data and data["text"] is None
