"""The KV cache page's long runs (generation, the KV-head counterfactual, the per-layer sharing sweep and
the step that times it) run on one torch thread while the machine is oversubscribed, as the page's trace
and the causal report do (txviz.threads), and give the process its own thread count back after."""

import pytest
import torch

from app.services import generation, kv_sharing, texts
from txviz import threads
from txviz.limits import Limits


@pytest.fixture
def loaded_machine(monkeypatch):
    """Other processes running far more tasks than there are cores, and a record of torch's thread count inside each pass."""
    import txviz.model.transformer as transformer

    seen, own = [], torch.get_num_threads()
    forward = transformer.Decoder.forward
    monkeypatch.setattr(threads, "others_running", lambda: 99.0)
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


@pytest.fixture
def byte_level_model(monkeypatch):
    """A tiny random model on a byte-level BPE tokenizer, which covers every sentence of the built-in set
    (a tenth of it here)."""
    from tests.helpers.byte_tokenizer import ByteLevelTokenizer
    from txviz.analysis.coref import ranking
    from txviz.config import ModelConfig
    from txviz.loading.loaded import LoadedModel
    from txviz.model.transformer import Decoder

    cases = ranking.builtin_cases()[::10]
    monkeypatch.setattr(ranking, "builtin_cases", lambda: cases)
    tokenizer = ByteLevelTokenizer()
    config = ModelConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                         ffn_hidden=64, name="tiny")
    return LoadedModel(model=Decoder(config).eval(), tokenizer=tokenizer, config=config, source="tiny", format="test")


def test_the_heads_runs_take_one_thread_under_load_and_report_each_batch(tiny, byte_level_model, loaded_machine):
    from app.services import heads

    reported = []
    heads.coref_evaluation(byte_level_model, "sink", lambda fraction, message: reported.append((fraction, message)))
    heads.induction_scores(tiny, 8, 0)
    assert loaded_machine and set(loaded_machine) == {1}, loaded_machine
    assert torch.get_num_threads() == 2
    n = len(reported)
    assert n > 1 and reported == [(i / n, f"batch {i} of {n}") for i in range(1, n + 1)]


def test_the_thread_count_follows_the_load_batch_by_batch(monkeypatch):
    """A run that meets load half-way drops to one thread at the next batch, and takes the cores back when
    they are free again: the count is decided again after every batch, not once at the start."""
    from txviz.batches import batch_done

    busy = iter([0.0, 3.0, 0.0])
    monkeypatch.setattr(threads, "others_running", lambda: next(busy))
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (2.0, 2.0, 2.0))  # no more than this process's own work
    monkeypatch.setattr(threads, "PROCESS_THREADS", 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    seen = []
    with threads.threads_for_this_run():
        seen.append(torch.get_num_threads())
        for done in (1, 2):
            batch_done(done, 3)
            seen.append(torch.get_num_threads())
    assert seen == [2, 1, 2]
    assert threads.threads_for_load(2, busy=0.4, cpus=2) == 2 and threads.threads_for_load(8, busy=2, cpus=4) == 2


def test_the_load_counts_other_processes_only(monkeypatch):
    """This process's own running threads (its OpenMP workers, the server) are not load: a run on a quiet
    machine does not send the next one to a single thread, as the 1-minute load average did."""
    queue = iter([3, 3, 5])
    monkeypatch.setattr(threads, "_run_queue", lambda: next(queue))
    monkeypatch.setattr(threads, "_own_running", lambda: 3)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (9.0, 9.0, 9.0))  # a minute of this process's own work
    assert threads.others_running() == 0.0  # median of 0, 0, 2



@pytest.mark.parametrize("minute, expected", [(2.0, 2), (9.0, 1)])
def test_a_free_moment_under_sustained_load_keeps_one_thread(monkeypatch, minute, expected):
    """The run queue may show a free core for a moment on a busy machine: the last minute's load beyond
    this process's own threads still counts (2.0 on 2 cores: only this process's own work)."""
    monkeypatch.setattr(threads, "others_running", lambda: 0.0)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (minute, minute, minute))
    monkeypatch.setattr(threads, "PROCESS_THREADS", 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    assert threads.threads_now() == expected
