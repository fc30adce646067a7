"""A Decoding page's run on a quiet machine: the prompt's pass on every free core, the one-token steps on every
free core less the spare cores the service leaves to the server and the browser, and the process's own thread
count back after the run, after a branch, and after a callback that raises (a Stop or an error)."""

import os

import pytest
import torch

from app.services import decoding
from txviz import threads


STEPS = max(1, 2 - decoding.STREAMING_SPARE_CORES)  # the one-token steps' threads on the 2 cores below


class ControlException(BaseException):
    """What Streamlit raises out of a widget call to stop or rerun the script (not an Exception)."""


@pytest.fixture
def quiet_machine(monkeypatch):
    """Two cores nobody else uses, and torch's thread count at each forward pass."""
    import txviz.model.transformer as transformer

    seen, own = [], torch.get_num_threads()
    forward = transformer.Decoder.forward
    monkeypatch.setattr(threads, "others_running", lambda: 0.0)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(transformer.Decoder, "forward",
                        lambda self, ids, *a, **k: seen.append((ids.shape[1], torch.get_num_threads()))
                        or forward(self, ids, *a, **k))
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "PROCESS_THREADS", 2)
    yield seen
    torch.set_num_threads(own)


def inputs(n: int = 4) -> decoding.DecodingInputs:
    return decoding.DecodingInputs(source="tiny", prompt="once upon a time", bos="none", chat=False, max_new_tokens=n)


def prompt_ids(tiny) -> list[int]:
    return tiny.tokenizer.encode("once upon a time there was", bos="none").ids


def test_the_prompt_takes_both_cores_the_streamed_steps_what_is_not_spared_and_the_count_comes_back(tiny, quiet_machine):
    ids = prompt_ids(tiny)
    run = decoding.run(tiny, inputs(), ids, on_step=lambda step: None)
    assert [calls for calls in quiet_machine if calls[0] > 1] == [(len(ids), 2)]  # the prompt's pass
    assert [threads_ for n, threads_ in quiet_machine if n == 1] == [STEPS] * (len(run.steps) - 1)
    assert torch.get_num_threads() == 2


def test_a_branch_streams_on_the_steps_cores_and_gives_the_count_back(tiny, quiet_machine):
    run = decoding.run(tiny, inputs(5), prompt_ids(tiny))
    quiet_machine.clear()
    other = next(c.id for c in run.steps[1].candidates if c.id != run.steps[1].token.id)
    decoding.branch_run(tiny, run, 1, other, on_step=lambda step: None)
    assert quiet_machine and {threads_ for _, threads_ in quiet_machine} == {STEPS}
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("raised", [RuntimeError, ControlException])
def test_a_callback_that_raises_mid_stream_gives_the_count_back(tiny, quiet_machine, raised):
    def on_step(step):
        if step.index == 2:
            raise raised("Stop")

    with pytest.raises(raised):
        decoding.run(tiny, inputs(6), prompt_ids(tiny), on_step=on_step)
    assert quiet_machine[-1] == (1, STEPS) and torch.get_num_threads() == 2
