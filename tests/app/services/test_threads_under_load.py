"""The KV cache page's long runs (generation, the KV-head counterfactual, the per-layer sharing sweep and
the step that times it) run on one torch thread while the machine is oversubscribed, as the page's trace
and the causal report do (app.services.threads), and give the process its own thread count back after."""

import pytest
import torch

from app.services import generation, kv_sharing, texts, threads
from txviz.limits import Limits


@pytest.fixture
def loaded_machine(monkeypatch):
    """The 1-minute load far above the cores, and a record of torch's thread count inside each pass."""
    import txviz.model.transformer as transformer

    seen, own = [], torch.get_num_threads()
    forward = transformer.Decoder.forward
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (99.0, 99.0, 99.0))
    monkeypatch.setattr(transformer.Decoder, "forward",
                        lambda self, *a, **k: seen.append(torch.get_num_threads()) or forward(self, *a, **k))
    torch.set_num_threads(2)  # as on the 2-core machine, so that one thread is a change
    monkeypatch.setattr(threads, "PROCESS_THREADS", 2)
    yield seen
    torch.set_num_threads(own)


@pytest.fixture(scope="module")
def ids(tiny):
    return texts.shipped_text_ids(tiny, next(iter(texts.shipped_texts())), 16)


@pytest.mark.parametrize("run", ["generation", "counterfactual", "sweep step", "sweep"])
def test_each_run_takes_one_thread_under_load_and_restores_the_count(tiny, ids, loaded_machine, run):
    if run == "generation":
        generation.generate_from_prompt(tiny, "once upon a time", "sink", Limits(), 3, True, False, stop_at_eos=False)
    elif run == "counterfactual":
        kv_sharing.kv_counterfactual(tiny, 1, ids)
    elif run == "sweep step":
        kv_sharing.layer_sharing_step_seconds(tiny, 1, ids, Limits())
    else:
        kv_sharing.layer_sharing(tiny, 1, ids, Limits())
    assert loaded_machine and set(loaded_machine) == {1}, loaded_machine
    assert torch.get_num_threads() == 2
