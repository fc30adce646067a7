"""The blockwise path's blocks shared out among worker threads: the same numbers as one thread computing
every block, the process's thread count left as it was, errors raised in the caller, and the caller
alone where gradients must flow."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest
import torch

import txviz.model.attention as attention
from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.capture import summaries
from txviz.model import block_workers

CAPTURE = ("head_summaries", "attn_probs", "q_rot", "k_rot", "logits")


@contextmanager
def torch_threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few rows, so that a 48-token prompt makes a dozen of them."""
    monkeypatch.setattr(attention, "BLOCK_ELEMENTS", 64)
    monkeypatch.setattr(attention, "MIN_BLOCK_ROWS", 3)


@pytest.fixture
def shares(monkeypatch) -> list[int]:
    """How many blocks each call of the workers took (one entry per Split.run)."""
    counts: list[int] = []
    run = block_workers.Split.run

    def counted(self, work, items):
        items = list(items)
        counts.append(len(items))
        return run(self, work, items)

    monkeypatch.setattr(block_workers.Split, "run", counted)
    return counts


@pytest.mark.parametrize("variant", ["gqa", "sliding_window", "alibi"])
def test_workers_give_bit_for_bit_what_one_thread_gives(variant, small_blocks, shares):
    config = tiny_config(**VARIANTS[variant])
    model, ids = random_decoder(config), random_ids(config, 48)
    with torch_threads(1):
        alone = trace(model, ids, capture=CAPTURE)
    assert shares == []  # one thread: the caller computes every block
    with torch_threads(2):
        shared = trace(model, ids, capture=CAPTURE)
    assert len(shares) == config.n_layers and min(shares) >= 2  # every layer's blocks but its first
    for name in CAPTURE:  # each worker's blocks are sized for its one thread: the same blocks, the same sums
        assert torch.equal(shared[name].nan_to_num(-7.0), alone[name].nan_to_num(-7.0)), name


def test_the_workers_keep_one_thread_each_and_the_process_keeps_its_count(small_blocks):
    config = tiny_config()
    with torch_threads(2):
        trace(random_decoder(config), random_ids(config, 48), capture=("head_summaries",))
        assert torch.get_num_threads() == 2
        pool = block_workers._POOLS[(2, 1)]
        in_workers = {pool.submit(torch.get_num_threads).result() for _ in range(8)}
        seen = []
        later = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        later.start()
        later.join()
    assert in_workers == {1} and seen == [2]  # a thread started later starts from the process's count


def test_a_workers_error_reaches_the_caller_stops_the_layer_and_the_next_trace_runs(small_blocks, monkeypatch):
    config = tiny_config()
    model, ids = random_decoder(config), random_ids(config, 48)
    add = summaries.LayerSummaries.add
    done = []

    def fails_at_one_block(self, rows, keys, probs, scores):
        if rows.start == 6:  # one block of layer 0, early among them
            raise RuntimeError(f"block at row {rows.start}")
        add(self, rows, keys, probs, scores)
        time.sleep(0.02)  # every other block takes a while: the failure comes while the other worker works
        done.append(rows.start)

    with torch_threads(2):
        blocks = len(random_decoder(config).layer_context(0, torch.arange(48), torch.arange(48), torch.float32)
                     .row_blocks(48, config.n_heads, 1))
        monkeypatch.setattr(summaries.LayerSummaries, "add", fails_at_one_block)
        with pytest.raises(RuntimeError, match="block at row 6"):
            trace(model, ids, capture=("head_summaries",))
        assert len(done) < blocks - 2  # the other worker stopped at its next block, not at the layer's end
        monkeypatch.setattr(summaries.LayerSummaries, "add", add)
        again = trace(model, ids, capture=("head_summaries",))
    assert not again["head_summaries"][:, :, :, 1:, 0].isnan().any()  # every row after the first has an entropy


def test_only_a_call_without_gradients_to_flow_is_shared_out():
    leaf, plain = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    with torch_threads(2):
        with torch.enable_grad():
            assert block_workers.split_for(leaf, plain) is None  # autograd through writes from several threads
            assert block_workers.split_for(plain, plain) == block_workers.Split(2, 1)
        with torch.no_grad():
            assert block_workers.split_for(leaf, plain) == block_workers.Split(2, 1)
    with torch_threads(1):
        assert block_workers.split_for(plain) is None
