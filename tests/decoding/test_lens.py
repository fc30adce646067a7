"""The "decided at layer" strip: each step's lens ranks and probabilities of the chosen token equal
the logit lens computed directly on the full sequence, and its first top-1 point follows."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.decoding_reference import lens_of_sequence
from tests.helpers.tiny import VARIANTS, random_decoder, tiny_config
from txviz.decoding import StepRecordRequest, branch, decode
from txviz.decoding.lens import chosen_rank_and_prob
from txviz.generate import Sampling

LENS_VARIANTS = {"deep": dict(n_layers=5, n_kv_heads=2), "sliding_window": dict(VARIANTS["sliding_window"], n_layers=4),
                 "moe": dict(VARIANTS["moe"], n_layers=4), "softcapped": dict(n_layers=4, final_softcap=2.0)}
PROMPT = [7, 31, 2, 64, 11]


@pytest.mark.parametrize("after_run", [False, True], ids=["each_step", "after_run"])
@pytest.mark.parametrize("sampling", [Sampling(), Sampling(temperature=1.5, seed=4)], ids=["greedy", "sampled"])
@pytest.mark.parametrize("variant", sorted(LENS_VARIANTS))
def test_the_lens_strip_equals_the_logit_lens_of_the_full_sequence(variant, sampling, after_run):
    model = random_decoder(tiny_config(**LENS_VARIANTS[variant]), seed=1)
    record = StepRecordRequest(candidates=3, lens=True, lens_after_run=after_run)
    run = decode(model, PROMPT, 20, sampling=sampling, record=record)  # 20 steps: several products after the run
    lens = lens_of_sequence(model, list(run.ids[:-1]))  # (L+1, T, V): the query of step t is at position − 1
    for step in run.steps:
        logits = lens[:, step.query_position]  # (L+1, V)
        chosen = logits[:, step.token.id]
        ranks = (1 + (logits > chosen[:, None]).sum(dim=-1)).tolist()
        assert list(step.lens.ranks) == ranks
        assert_close(torch.tensor(step.lens.probs), torch.softmax(logits, dim=-1)[:, step.token.id], rtol=0, atol=1e-5)
        assert step.lens.first_top1_layer == next((i for i, rank in enumerate(ranks) if rank == 1), None)
        assert step.lens.ranks[-1] == step.token.rank  # the last point is the model's own output
        assert step.lens.probs[-1] == pytest.approx(step.token.prob, abs=1e-5)
    strip = [step.lens.ranks for step in run.steps]
    assert any(rank > 1 for ranks in strip for rank in ranks[:-1])  # not a strip of ones


def test_a_forced_step_reads_the_lens_of_its_own_token():
    model = random_decoder(tiny_config(**LENS_VARIANTS["deep"]), seed=1)
    run = decode(model, PROMPT, 8, record=StepRecordRequest(candidates=4, lens=True))
    choice = run.steps[5].candidates[3].id
    forced = branch(model, run, 5, choice).steps[5]
    logits = lens_of_sequence(model, list(run.ids[:forced.position]))[:, forced.query_position]
    assert list(forced.lens.ranks) == (1 + (logits > logits[:, choice:choice + 1]).sum(dim=-1)).tolist()
    assert forced.lens.ranks[-1] == 4


def test_a_lens_read_after_the_run_is_missing_from_the_streamed_steps_only():
    model = random_decoder(tiny_config(**LENS_VARIANTS["sliding_window"]), seed=1)
    streamed = []
    run = decode(model, PROMPT, 18, record=StepRecordRequest(lens=True, lens_after_run=True), on_step=streamed.append)
    assert all(step.lens is None for step in streamed)
    each_step = decode(model, PROMPT, 18, record=StepRecordRequest(lens=True))
    assert [step.lens.ranks for step in run.steps] == [step.lens.ranks for step in each_step.steps]
    forked = branch(model, run, 3, run.steps[3].candidates[1].id)
    assert all(step.lens is not None for step in forked.steps)


def test_no_lens_unless_asked():
    model = random_decoder(tiny_config())
    assert all(step.lens is None for step in decode(model, PROMPT, 4).steps)


def _softmax_rank_and_prob(logits, index):
    """The lens' first formula: 1 + how many logits are greater, and the softmax's probability."""
    chosen = logits.gather(-1, index)
    return (logits > chosen).sum(dim=-1) + 1, torch.softmax(logits, dim=-1).gather(-1, index)[..., 0]


def test_the_in_place_rank_and_probability_equal_the_softmax_formula():
    model = random_decoder(tiny_config(**LENS_VARIANTS["deep"]), seed=3)
    logits = lens_of_sequence(model, PROMPT * 3).float()  # (L+1, T, V)
    generator = torch.Generator().manual_seed(0)
    index = torch.randint(0, logits.shape[-1], logits.shape[:-1] + (1,), generator=generator)
    index[:, 0, 0] = logits[:, 0].argmax(dim=-1)  # a top-1 token at every point
    ties = torch.tensor([[0.5, 2.0, 2.0, -1.0, 2.0, 0.5]])  # the chosen token tied with others: not counted
    far = torch.tensor([[0.0, 100.0, -3.0, 95.0]])  # the chosen token 100 nats down: exp overflows
    wide = 8 * torch.randn(6, 49152, generator=generator)  # a vocabulary as wide as SmolLM2's
    wide_index = torch.randint(0, 49152, (6, 1), generator=generator)
    wide_index[0, 0] = wide[0].argmax()
    cases = [(logits, index), (wide, wide_index), (ties, torch.tensor([[2]])), (ties, torch.tensor([[0]])),
             (far, torch.tensor([[0]])), (far, torch.tensor([[1]]))]
    for values, chosen in cases:
        expected_ranks, expected_probs = _softmax_rank_and_prob(values, chosen)
        exact_probs = _softmax_rank_and_prob(values.double(), chosen)[1]
        ranks, probs = chosen_rank_and_prob(values.clone(), chosen)
        assert ranks.tolist() == expected_ranks.tolist()
        assert_close(probs.double(), exact_probs, rtol=0, atol=1e-6)  # float64's softmax
        assert_close(probs, expected_probs, rtol=0, atol=2e-5)  # the float32 softmax is itself off by up to 2e-5
    assert chosen_rank_and_prob(ties.clone(), torch.tensor([[2]]))[0].item() == 1  # ties share the top rank
