"""A branch (another candidate at step t, continued on the cache of the tokens before it) equals a
run from scratch on the same prefix and choice, runs only the steps after t, and leaves the run it
branched from as it was."""

from __future__ import annotations

import pytest
from torch.testing import assert_close

from tests.helpers.tiny import VARIANTS, random_decoder, tiny_config
from txviz.decoding import StepRecordRequest, branch, decode
from txviz.generate import Sampling
from txviz.model import InputError

PROMPT = [7, 31, 2, 64]
RECORD = StepRecordRequest(candidates=6, lens=True, attention_layers=(0, 1))
BRANCH_VARIANTS = {"mha": VARIANTS["mha"], "sliding_window": VARIANTS["sliding_window"], "moe": VARIANTS["moe"],
                   "sliding_and_full": dict(n_kv_heads=2, sliding_window=4, layer_types=("sliding", "full"))}
SAMPLERS = {"greedy": Sampling(), "sampled": Sampling(temperature=1.0, top_k=20, seed=3)}


def other_candidate(step) -> int:
    return next(c.id for c in step.candidates if c.id != step.token.id)


def assert_same_steps(got, expected):
    assert [s.token.id for s in got] == [s.token.id for s in expected]
    for mine, theirs in zip(got, expected):
        assert [c.id for c in mine.candidates] == [c.id for c in theirs.candidates]
        assert_close([c.prob_sampled for c in mine.candidates], [c.prob_sampled for c in theirs.candidates],
                     rtol=0, atol=1e-5)
        assert mine.kv_bytes_per_layer == theirs.kv_bytes_per_layer
        assert mine.lens.ranks == theirs.lens.ranks
        for layer, row in theirs.attention.items():
            assert_close(mine.attention[layer], row, rtol=0, atol=1e-5)


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
@pytest.mark.parametrize("variant", sorted(BRANCH_VARIANTS))
def test_a_branch_equals_a_run_from_scratch_with_the_same_prefix_and_choice(variant, sampler):
    model = random_decoder(tiny_config(**BRANCH_VARIANTS[variant]))
    sampling = SAMPLERS[sampler]
    run = decode(model, PROMPT, 16, sampling=sampling, record=RECORD)
    at = 8  # position 12: past a window of 4 or 5
    choice = other_candidate(run.steps[at])
    forked = branch(model, run, at, choice)
    scratch = decode(model, PROMPT + list(run.new_ids[:at]) + [choice], 16 - at - 1, sampling=sampling, record=RECORD)
    assert forked.new_ids == run.new_ids[:at] + (choice,) + scratch.new_ids
    assert forked.new_ids[at + 1:] != run.new_ids[at + 1:]  # the choice changed what followed
    assert forked.steps[:at] == run.steps[:at]
    assert_same_steps(forked.steps[at + 1:], scratch.steps)
    assert forked.reused_tokens == len(PROMPT) + at and forked.branched_at == at
    assert [s.tokens_computed for s in forked.steps[at:]] == [0] + [1] * (16 - at - 1)
    forced = forked.steps[at]
    assert forced.forced and forced.token.id == choice and forced.candidates == run.steps[at].candidates


def test_branches_leave_the_run_as_it_was_and_branch_again():
    model = random_decoder(tiny_config(**VARIANTS["sliding_window"]))
    run = decode(model, PROMPT, 14, record=RECORD)
    before = run.new_ids
    first = branch(model, run, 6, run.steps[6].candidates[1].id)
    second = branch(model, run, 3, run.steps[3].candidates[2].id)
    of_branch = branch(model, first, 10, first.steps[10].candidates[1].id)
    assert run.new_ids == before and run.steps == decode(model, PROMPT, 14, record=RECORD).steps
    for forked in (second, of_branch):
        at = forked.branched_at
        scratch = decode(model, PROMPT + list(forked.new_ids[:at + 1]), 14 - at - 1, record=RECORD)
        assert forked.new_ids[at + 1:] == scratch.new_ids
    assert of_branch.new_ids[:10] == first.new_ids[:10]


def test_a_branch_at_the_first_step_reuses_the_prompt():
    model = random_decoder(tiny_config(**VARIANTS["gqa"]))
    run = decode(model, PROMPT, 8, record=RECORD)
    forked = branch(model, run, 0, run.steps[0].candidates[3].id, max_new_tokens=5)
    scratch = decode(model, PROMPT + [forked.new_ids[0]], 4, record=RECORD)
    assert forked.reused_tokens == len(PROMPT) and len(forked.steps) == 5
    assert forked.new_ids[1:] == scratch.new_ids


def test_a_branch_to_a_stop_token_stops_there():
    model = random_decoder(tiny_config(**VARIANTS["mha"]))
    run = decode(model, PROMPT, 10, record=RECORD)
    stop = run.steps[4].candidates[1].id
    assert stop not in run.new_ids[:5]
    stopping = decode(model, PROMPT, 10, record=RECORD, stop_ids=[stop])
    forked = branch(model, stopping, 4, stop)
    assert forked.new_ids == run.new_ids[:4] + (stop,) and forked.stop_reason == "stop_id"


@pytest.mark.parametrize("step,token,message", [
    (20, None, "step 20 is outside the run's steps 0..9"),
    (2, "not_offered", "is not among step 2's 6 candidates"),
])
def test_bad_branches_raise(step, token, message):
    model = random_decoder(tiny_config(**VARIANTS["mha"]))
    run = decode(model, PROMPT, 10, record=RECORD)
    if token == "not_offered":
        offered = {c.id for c in run.steps[2].candidates} | {run.steps[2].token.id}
        token = next(t for t in range(model.config.vocab_size) if t not in offered)
    with pytest.raises(InputError, match=message):
        branch(model, run, step, token if token is not None else 0)
