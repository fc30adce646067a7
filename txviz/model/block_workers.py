"""Worker threads that share out the blockwise attention path's blocks on the CPU.

Torch splits each operation on a block among its intra-op threads and ends it at a barrier every thread
waits at. A block takes about fifty such operations, most of a fraction of a millisecond, so with two
threads the cores spend much of a layer waiting for each other: measured on SmolLM2 at 4096 tokens (AMD
EPYC, 2 cores), the blockwise products ran 1.6× faster on two threads than on one where torch's fused
kernel ran 1.9× faster. Here each worker thread takes whole blocks, one after another, with intra-op
threads of its own (one each on two cores), and the layer waits once, at its end: the same layer's
attention with every summary went from 1.74× to 1.37× the fused kernel, with bitwise the same values,
and a whole summaries trace from 1.29–1.38× to 1.15–1.20× a plain forward at 4096 tokens (1.44× to 1.36× at
8192; no change at 1024), measured side by side in one process.
torch releases Python's GIL inside every operation, so the workers take turns only for their few
microseconds of Python per operation.

A thread's intra-op thread count is its own under torch's OpenMP backend (a new thread starts from the
process's count, read on its first parallel operation); ``torch.set_num_threads`` sets the calling
thread's count and the process's. So a pool's workers set theirs once, when the pool is made, and the
process's count is put back at once, under a lock. Other backends share one pool of intra-op threads
among all threads, where workers would only add threads: there, and for one thread, the caller runs every
block itself.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, TypeVar

import torch

MAX_WORKERS = 4  # beyond this, each worker gets more intra-op threads instead (the workers' Python takes turns)

Item = TypeVar("Item")

_LOCK = threading.Lock()
_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}


@dataclass(frozen=True)
class Split:
    """``workers`` threads with ``threads_each`` intra-op threads each."""

    workers: int
    threads_each: int

    def run(self, work: Callable[[Iterator[Item]], None], items: Iterable[Item]) -> None:
        """``work(items)`` in every worker at once, each taking the next item when it is ready (blocks
        of late rows see more keys and cost more, so a fixed share would leave one worker waiting); in
        the caller's grad and inference mode; returns when every item is done and raises what a
        worker raised."""
        queue = _Queue(items)
        grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()

        def one_worker() -> None:
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                try:
                    work(queue)
                except BaseException:
                    queue.close()  # the layer has failed: the other workers stop at their next item
                    raise

        pool = _pool(self.workers, self.threads_each)
        futures = [pool.submit(one_worker) for _ in range(self.workers)]
        wait(futures)  # all of them, even after one failed: none may still write into the layer once this returns
        for future in futures:
            future.result()


def run_blocks(split: Split | None, blocks: list[Item], runner: Callable[[], Callable[[Iterable[Item]], None]]) -> None:
    """Every block through ``runner()``s: each call makes one thread's run (its buffers) on the calling
    thread, and the run takes blocks one after another. Without a split (or with fewer than three blocks)
    the caller runs them all. Else the caller runs the first block alone, so whatever a recorder makes on
    its first block exists before the workers write into it, and the workers share out the rest, one run
    each. Every run is made here, not in its worker: glibc gives each thread an arena of its own and hands
    a worker's freed megabytes back to the system, so buffers made in the workers were fresh pages every
    layer (about 250,000 more page faults per trace at 4096 tokens)."""
    first = runner()
    if split is None or len(blocks) < 3:
        first(blocks)
        return
    first(blocks[:1])
    runs = [first] + [runner() for _ in range(split.workers - 1)]
    split.run(lambda share: runs.pop()(share), blocks[1:])  # list.pop: one run per worker, atomically


def split_for(*tensors: torch.Tensor) -> Split | None:
    """How to share out blocks computed from ``tensors``: None (the caller runs them all with torch's
    threads) on one thread, off the CPU, where gradients must flow (autograd through in-place writes from
    several threads), or without torch's OpenMP backend."""
    threads = torch.get_num_threads()
    if threads < 2 or not _openmp() or any(t.device.type != "cpu" for t in tensors):
        return None
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return None
    workers = min(threads, MAX_WORKERS)
    return Split(workers, threads // workers)


class _Queue:
    """An iterator that several threads draw from, each item to one of them."""

    def __init__(self, items: Iterable):
        self._items, self._lock = iter(items), threading.Lock()

    def __iter__(self):
        return self

    def __next__(self):
        with self._lock:
            return next(self._items)

    def close(self) -> None:
        with self._lock:
            self._items = iter(())


def _pool(workers: int, threads_each: int) -> ThreadPoolExecutor:
    with _LOCK:
        key = (workers, threads_each)
        if key not in _POOLS:
            _POOLS[key] = _start(workers, threads_each)
        return _POOLS[key]


def _start(workers: int, threads_each: int) -> ThreadPoolExecutor:
    """A pool whose ``workers`` threads are all running, each with ``threads_each`` intra-op threads, and
    the process's count as it was."""
    process_threads = torch.get_num_threads()
    started = threading.Barrier(workers)

    def set_threads() -> None:
        torch.get_num_threads()  # the thread's first read takes the process's count: before, not after, its own
        torch.set_num_threads(threads_each)
        started.wait()  # every worker is made now: one task per thread

    pool = ThreadPoolExecutor(workers, thread_name_prefix="txviz-blocks")
    try:
        for future in [pool.submit(set_threads) for _ in range(workers)]:
            future.result()
    finally:
        torch.set_num_threads(process_threads)
    return pool


@functools.cache
def _openmp() -> bool:
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()
