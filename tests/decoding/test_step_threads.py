"""Torch threads of a run's steps: a prompt's pass and the lens read after the run on the caller's count,
the one-token steps on ``step_threads``, and the caller's count back however the run ends (its last token,
a stop, an error in the caller's callback, a control exception such as a web page's rerun)."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import random_decoder, tiny_config
from txviz.decoding import StepRecordRequest, branch, decode
from txviz.decoding import run as run_module

PROMPT = [7, 31, 2]
CALLERS = 3  # distinct from the step threads and from a 2-core machine's default
LENS = StepRecordRequest(candidates=3, lens=True, lens_after_run=True)


class ControlException(BaseException):
    """What a web framework raises out of a callback to stop or rerun a script (not an Exception)."""


@pytest.fixture
def callers_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(CALLERS)
    yield CALLERS
    torch.set_num_threads(before)


def spied(model) -> list[tuple[int, int]]:
    """(tokens fed, torch threads) at every forward call of ``model``."""
    calls, forward = [], model.forward

    def counted(ids, *args, **kwargs):
        calls.append((ids.shape[1], torch.get_num_threads()))
        return forward(ids, *args, **kwargs)

    model.forward = counted
    return calls


def test_one_token_steps_run_on_step_threads_the_prompt_and_the_lens_read_on_the_callers(callers_threads, monkeypatch):
    model = random_decoder(tiny_config())
    lens_threads, read = [], run_module.lens_readings
    monkeypatch.setattr(run_module, "lens_readings",
                        lambda *args: lens_threads.append(torch.get_num_threads()) or read(*args))
    calls = spied(model)
    run = decode(model, PROMPT, 5, record=LENS, step_threads=1)
    assert calls == [(3, CALLERS)] + [(1, 1)] * 4
    assert lens_threads == [CALLERS] and torch.get_num_threads() == CALLERS
    assert run.new_ids == decode(model, PROMPT, 5, record=LENS).new_ids
    assert all(step.lens is not None for step in run.steps)


def test_without_step_threads_every_step_keeps_the_callers_count(callers_threads):
    model = random_decoder(tiny_config())
    calls = spied(model)
    decode(model, PROMPT, 3)
    assert calls == [(3, CALLERS), (1, CALLERS), (1, CALLERS)]


def test_a_stopped_run_gives_the_callers_count_back(callers_threads):
    model = random_decoder(tiny_config())
    seen = []
    run = decode(model, PROMPT, 10, on_step=seen.append, should_stop=lambda: len(seen) >= 3, step_threads=1)
    assert run.stop_reason == "stopped" and len(run.steps) == 3
    assert torch.get_num_threads() == CALLERS


@pytest.mark.parametrize("raised", [RuntimeError, ControlException])
def test_a_raise_in_the_callers_callback_gives_the_callers_count_back(callers_threads, raised):
    model = random_decoder(tiny_config())

    def on_step(step):
        if step.index == 2:
            assert torch.get_num_threads() == 1  # inside the one-token steps
            raise raised("the page went away")

    with pytest.raises(raised):
        decode(model, PROMPT, 10, on_step=on_step, step_threads=1)
    assert torch.get_num_threads() == CALLERS


def test_a_branch_runs_its_steps_on_step_threads_and_gives_the_count_back(callers_threads):
    model = random_decoder(tiny_config())
    source = decode(model, PROMPT, 6, record=StepRecordRequest(candidates=3))
    other = source.steps[2].candidates[1].id
    calls = spied(model)
    branched = branch(model, source, 2, other, step_threads=1)
    assert calls and all(threads == 1 for _, threads in calls)
    assert torch.get_num_threads() == CALLERS
    assert branched.new_ids[:3] == source.new_ids[:2] + (other,)
