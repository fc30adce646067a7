"""One model serves every session: traces and generations from many threads at once on the shared
default model give exactly what they give one at a time.

Sized to the point, not beyond, to keep the fast tier fast: twelve prompts of different lengths and scripts
traced once each on twelve threads (they used to run twice over: 36 traces, now 24), and generations of 5
tokens (the prefill and four cached steps, each step's cache size compared) where 8 were asked for."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from txviz.generate import generate
from txviz.capture.trace import trace

pytestmark = pytest.mark.default_model

THREADS = 12
NEW_TOKENS = 5
PROMPTS = [
    "The trophy didn't fit in the suitcase because it was too big.", "Mary met John and she smiled.",
    "Paris is the capital of France.", "def f(x):\n    return x * 2", "漢字とかなの文", "שלום עולם", "😀 emoji 👍🏽 here",
    "1 2 3 4 5 6 7 8 9 10", "a", "The the the the the.", "Tabs\tand\nnewlines\r\n", "Zero\x00width\u200bjoiner",
]


def run_all(function, items, workers):
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, items))


def run_overlapping(function, items, workers) -> tuple[list, int]:
    """``run_all``, and the most calls that were running at one moment: a test of concurrency proves it ran
    some (on a busy machine threads can take turns one whole call at a time)."""
    spans = []

    def timed(item):
        started = time.perf_counter()
        result = function(item)
        spans.append((started, time.perf_counter()))
        return result

    results = run_all(timed, items, workers)
    peak = max(sum(start <= t < end for start, end in spans) for t, _ in spans)
    return results, peak


def test_traces_from_many_threads_equal_sequential_ones(default_model):
    model, tokenizer = default_model.model, default_model.tokenizer
    ids = [torch.tensor(tokenizer.encode(p, bos="sink").ids) for p in PROMPTS]
    capture = ("attn_probs", "resid_norm", "logits")

    def one(x):
        return trace(model, x, capture=capture, layers=[0, 7, 29])

    started = time.perf_counter()
    sequential = [one(x) for x in ids]
    sequential_s = time.perf_counter() - started
    started = time.perf_counter()
    concurrent, peak = run_overlapping(one, ids, THREADS)  # every prompt at once, each on its own thread
    concurrent_s = time.perf_counter() - started
    assert peak >= 2, "no two traces ran at once: nothing concurrent was tested"
    assert len(concurrent) == len(sequential)
    for expected, got in zip(sequential, concurrent):
        assert torch.equal(expected.ids, got.ids)
        for name in capture:
            assert torch.equal(expected[name], got[name]), name
    print(f"\n{len(ids)} traces sequentially {sequential_s:.2f} s; again on {THREADS} threads "
          f"{concurrent_s:.2f} s, up to {peak} at once")


def test_generation_from_several_threads_equals_sequential(default_model):
    model, tokenizer = default_model.model, default_model.tokenizer
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": p}]) for p in PROMPTS[:4]]
    ids = [torch.tensor(tokenizer.encode(p).ids) for p in prompts]
    stop = (tokenizer.eos_id,)

    def one(x):
        result = generate(model, x, NEW_TOKENS, stop_ids=stop)
        return result.new_ids, tuple(s.cache_bytes for s in result.steps)

    sequential = [one(x) for x in ids]
    concurrent, peak = run_overlapping(one, ids, len(ids))
    assert concurrent == sequential and peak >= 2, peak
    assert all(len(new) == NEW_TOKENS for new, _ in sequential)  # no stop came early: every step compared
    # cached and uncached decoding at once, from different threads, each as it is alone
    mixed = [(x, True) for x in ids[:2]] + [(x, False) for x in ids[:2]]

    def either(job):
        return generate(model, job[0], 3, use_cache=job[1]).new_ids

    assert run_all(either, mixed, 4) == [either(job) for job in mixed]
