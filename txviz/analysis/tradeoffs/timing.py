"""Two tradeoffs measured on the machine txviz runs on, not quoted from papers.

FlashAttention (Dao et al. 2022): the naive attention of the tutorial materializes the T×T
score matrix (and its masked and softmaxed copies) before multiplying by V; an IO-aware kernel works
through tiles of keys with a running softmax and never holds the whole matrix. Same mathematics, so
the same outputs (checked with ``assert_close`` on every length), different time and memory.
``torch.nn.functional.scaled_dot_product_attention`` picks such a kernel (flash on CUDA and, for
float32/bfloat16 without an explicit mask, on the CPU as well).

Memory is measured, not estimated: on CUDA ``torch.cuda.max_memory_allocated`` above what was
allocated before the call; on the CPU the allocator's own allocation and free events, recorded by
``torch.profiler`` with ``profile_memory=True``, summed in time order, and their running maximum
taken. Both count the output too. The analytic size of one B×H×T×T score matrix is reported beside
them, labelled as such.

Why transformers replaced RNNs: a recurrent model must read token t before token t+1. A
decoder can do the same (one token at a time, carrying its KV cache the way an RNN carries its
hidden state), or read all T tokens in one parallel pass. Both give the same last logits (checked);
the parallel pass is what makes training on long sequences fast.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch.nn import functional as F

from txviz.model.kv_cache import KVCache

Progress = Callable[[float, str], None]
_PROFILER = threading.Lock()  # one torch.profiler session per process: two at once crash it (segfault)


# ---- FlashAttention vs naive ----------------------------------------------------------------------
def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The tutorial's attention formula with a causal mask: (B, H, T, D) each → (B, H, T, D), the T×T
    scores materialized."""
    t = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T, T)
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)  # (T, T)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # (B, H, T, T)
    return weights @ v


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The same attention through PyTorch's fused kernel (no explicit mask, so flash is eligible)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def score_matrix_bytes(batch: int, n_heads: int, tokens: int, element_bytes: int) -> int:
    """Analytic: bytes of one B×H×T×T score matrix (naive attention holds two or three at once)."""
    return batch * n_heads * tokens * tokens * element_bytes


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_bytes(fn: Callable[[], torch.Tensor], device: torch.device) -> tuple[torch.Tensor, int, str]:
    """(result, peak bytes allocated during ``fn`` above the level before it, how it was measured)."""
    device = torch.device(device)
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn()
        _sync(device)
        return result, torch.cuda.max_memory_allocated(device) - before, "torch.cuda.max_memory_allocated"
    from torch.profiler import ProfilerActivity, profile

    with _PROFILER, profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()  # the profiler records this thread's allocator events only
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    level = peak = 0
    for _, nbytes in events:  # allocations positive, frees negative, in time order
        level += nbytes
        peak = max(peak, level)
    return result, peak, "torch.profiler allocator events (CPU)"


def timed(fn: Callable[[], torch.Tensor], repeats: int, device: torch.device) -> tuple[float, torch.Tensor]:
    """(median seconds over ``repeats`` calls, the last call's result)."""
    times, result = [], None
    for _ in range(max(1, repeats)):
        _sync(device)
        start = time.perf_counter()
        result = fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def alternated(first: Callable[[], torch.Tensor] | None, second: Callable[[], torch.Tensor], repeats: int,
               device: torch.device) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(every call's seconds of ``first``, of ``second``), the two called in turn ``repeats`` times, so a busy
    moment of the machine slows both rather than one; ``first`` None: only ``second``."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(max(1, repeats)):
        for fn, kept in ((first, times[0]), (second, times[1])):
            if fn is not None:
                kept.append(timed(fn, 1, device)[0])
    return tuple(times[0]), tuple(times[1])


@dataclass(frozen=True)
class AttentionTiming:
    """One sequence length: naive vs SDPA, each the median of its runs (``naive_runs``, ``sdpa_runs``:
    every run's seconds). The naive fields are None where it was skipped (its score matrices would not
    fit in ``max_naive_bytes``)."""

    tokens: int
    sdpa_s: float
    sdpa_peak_bytes: int
    score_matrix_bytes: int  # analytic, one B×H×T×T matrix
    naive_s: float | None
    naive_peak_bytes: int | None
    max_abs_diff: float | None  # between the two outputs
    memory_method: str
    naive_runs: tuple[float, ...] = ()
    sdpa_runs: tuple[float, ...] = ()

    @property
    def speedup(self) -> float | None:
        return None if self.naive_s is None else self.naive_s / self.sdpa_s

    @property
    def noise_decides(self) -> bool:
        """True when the slowest run of the faster method reaches the fastest of the other: runs this far
        apart do not say which one is faster at this length."""
        if not self.naive_runs or not self.sdpa_runs:
            return False
        return max(self.naive_runs) >= min(self.sdpa_runs) and max(self.sdpa_runs) >= min(self.naive_runs)

    def to_dict(self) -> dict:
        return {**self.__dict__, "speedup": self.speedup, "noise_decides": self.noise_decides}


def attention_benchmark(lengths: Sequence[int], n_heads: int, head_dim: int, *, batch: int = 1,
                        dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu", repeats: int = 5,
                        max_naive_bytes: int | None = None, seed: int = 0,
                        progress: Progress | None = None) -> list[AttentionTiming]:
    """Time and peak memory of naive attention and SDPA on random (B, H, T, D) inputs, for each T: each
    called ``repeats`` times in turn, every run's time kept. Raises AssertionError if the two outputs
    differ beyond float tolerance."""
    device = torch.device(device)
    element = torch.empty((), dtype=dtype).element_size()
    tolerance = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    lengths = sorted(set(int(t) for t in lengths))
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for i, tokens in enumerate(lengths):
        if progress:
            progress(i / len(lengths), f"{tokens} tokens")
        q, k, v = (torch.randn(batch, n_heads, tokens, head_dim, generator=generator).to(device, dtype) for _ in range(3))
        scores = score_matrix_bytes(batch, n_heads, tokens, element)
        run_naive = max_naive_bytes is None or 3 * scores <= max_naive_bytes
        fused, fused_peak, method = peak_bytes(lambda: sdpa_attention(q, k, v), device)
        naive_s = naive_peak = diff = None
        if run_naive:
            plain, naive_peak, _ = peak_bytes(lambda: naive_attention(q, k, v), device)
            torch.testing.assert_close(fused, plain, **tolerance)
            diff = float((fused.float() - plain.float()).abs().max())
            del plain
        naive_runs, sdpa_runs = alternated((lambda: naive_attention(q, k, v)) if run_naive else None,
                                           lambda: sdpa_attention(q, k, v), repeats, device)
        naive_s = statistics.median(naive_runs) if naive_runs else None
        rows.append(AttentionTiming(tokens, statistics.median(sdpa_runs), fused_peak, scores, naive_s, naive_peak, diff,
                                    method, naive_runs, sdpa_runs))
    if progress:
        progress(1.0, "done")
    return rows


# ---- one token at a time vs all at once -----------------------------------------------------------
@dataclass(frozen=True)
class SequenceTiming:
    """Reading ``tokens`` tokens: one parallel forward vs ``tokens`` one-token steps with the KV cache."""

    tokens: int
    parallel_s: float
    sequential_s: float
    max_abs_diff: float  # between the last position's logits of the two

    @property
    def ratio(self) -> float:
        return self.sequential_s / self.parallel_s

    def to_dict(self) -> dict:
        return {**self.__dict__, "ratio": self.ratio}


def _sequential_logits(model, ids: torch.Tensor) -> torch.Tensor:
    weight = model.embed.weight
    cache = KVCache(model.config, ids.shape[1], batch=ids.shape[0], dtype=weight.dtype, device=weight.device)
    logits = None
    for t in range(ids.shape[1]):  # token t is read only after 0..t−1, like an RNN's step
        logits = model(ids[:, t:t + 1], cache=cache)
    return logits[:, -1]


def parallel_vs_sequential(model, lengths: Sequence[int], *, repeats: int = 1, seed: int = 0,
                           progress: Progress | None = None) -> list[SequenceTiming]:
    """For each T (ascending): seconds to read T random tokens in one forward pass and one token at a
    time with the KV cache, and the largest difference between their last logits."""
    config = model.config
    lengths = sorted(set(int(t) for t in lengths))
    if not lengths or lengths[0] < 1 or lengths[-1] > config.max_seq_len:
        raise ValueError(f"lengths must lie in 1..{config.max_seq_len} (the model's context), got {lengths}")
    device = model.embed.weight.device
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, config.vocab_size, (1, lengths[-1]), generator=generator).to(device)
    rows = []
    with torch.inference_mode():
        model(ids[:, :2])  # warm up the kernels once
        for i, tokens in enumerate(lengths):
            if progress:
                progress(i / len(lengths), f"{tokens} tokens")
            prefix = ids[:, :tokens]
            parallel_s, parallel = timed(lambda: model(prefix, last_only=True)[:, -1], repeats, device)
            sequential_s, sequential = timed(lambda: _sequential_logits(model, prefix), repeats, device)
            diff = float((parallel.float() - sequential.float()).abs().max())
            rows.append(SequenceTiming(tokens, parallel_s, sequential_s, diff))
    if progress:
        progress(1.0, "done")
    return rows
