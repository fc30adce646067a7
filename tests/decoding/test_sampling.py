"""The sampler's view of a step equals a reference written from the definitions, and a decoding
run draws the same tokens as a reference that recomputes the sequence and samples with torch and
the same seed."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.decoding_reference import recomputed_run, reference_sampler_probs
from tests.helpers.tiny import random_decoder, tiny_config
from txviz.decoding import SamplerView, StepRecordRequest, decode
from txviz.generate import Sampling, generate

SETTINGS = [dict(temperature=0.0), dict(temperature=1.0), dict(temperature=0.6), dict(temperature=1.0, top_k=5),
            dict(temperature=1.0, top_p=0.5), dict(temperature=0.8, top_k=30, top_p=0.9),
            dict(temperature=2.0, top_k=1), dict(temperature=1.5, top_p=0.3)]
IDS = [sorted(s.items()).__repr__() for s in SETTINGS]


@pytest.fixture(scope="module")
def model():
    return random_decoder(tiny_config(n_kv_heads=2, n_layers=3), seed=2)


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_the_sampler_view_equals_the_reference_distribution(settings):
    logits = torch.randn(1, 200, generator=torch.Generator().manual_seed(7)) * 3
    view = SamplerView(logits, Sampling(**settings))
    expected = reference_sampler_probs(logits[0], **settings)
    assert_close(view.sampled[0], expected, rtol=0, atol=1e-6)
    everyone = view.candidates(200)  # the whole vocabulary: what the page shows, summed
    assert sum(c.prob_sampled for c in everyone) == pytest.approx(1.0, abs=1e-5)
    assert view.kept == int((expected > 0).sum())
    shown = torch.tensor([c.prob_sampled for c in everyone])
    assert_close(shown, expected[[c.id for c in everyone]], rtol=0, atol=1e-6)
    assert_close(torch.tensor([c.prob for c in everyone]), torch.softmax(logits[0], 0)[[c.id for c in everyone]])
    tempered = torch.softmax(logits[0] / (settings["temperature"] or 1.0), 0)
    assert_close(torch.tensor([c.prob_tempered for c in everyone]), tempered[[c.id for c in everyone]])


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_decoded_tokens_equal_a_recomputed_reference_with_the_same_seed(model, settings):
    prompt = [5, 17, 3, 40]
    run = decode(model, prompt, 20, sampling=Sampling(seed=11, **settings), record=StepRecordRequest(candidates=97))
    tokens, logits, probs = recomputed_run(model, prompt, 20, seed=11, **settings)
    assert list(run.new_ids) == tokens
    assert len(set(tokens)) > 3  # a real sequence, not one token repeated
    for step, step_logits, step_probs in zip(run.steps, logits, probs):
        assert [c.id for c in step.candidates] == torch.argsort(step_logits, descending=True).tolist()
        shown = torch.tensor([c.prob_sampled for c in step.candidates])
        assert shown.sum() == pytest.approx(1.0, abs=1e-5)
        assert_close(shown, step_probs[[c.id for c in step.candidates]], rtol=0, atol=1e-5)
        assert step.token.prob_sampled > 0 and step.kept == int((step_probs > 0).sum())
        assert step.token.rank == 1 + int((step_logits > step_logits[step.token.id]).sum())


def test_sampled_runs_depend_on_the_seed_and_leave_the_greedy_path(model):
    greedy = decode(model, [5, 17, 3], 20).new_ids
    sampled = [decode(model, [5, 17, 3], 20, sampling=Sampling(temperature=1.0, seed=seed)).new_ids for seed in (0, 1)]
    assert sampled[0] != sampled[1] and greedy not in sampled


@pytest.mark.parametrize("settings", SETTINGS, ids=IDS)
def test_decode_draws_what_generate_draws(model, settings):
    sampling = Sampling(seed=5, **settings)
    assert decode(model, [9, 2], 25, sampling=sampling).new_ids == generate(model, [9, 2], 25, sampling=sampling).new_ids
