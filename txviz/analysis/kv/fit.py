"""Whether a model fits a GPU: the longest context whose KV cache fits beside the weights (``max_context``),
the longest whose whole bill (weights + KV cache + activations) fits (``longest_context``), and, in the
calculator's terms, the attention kind to show and the one context length at which the bill is summed up
(``fit``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from txviz.analysis.kv import memory
from txviz.analysis.kv.memory_model import MemoryModel, Spec, as_memory_model


def chosen_kind(picked: str | None, variants: Mapping[str, object], own_kind: str) -> str:
    """The kind picked when it is offered, else the model's own, else the first offered (a choice made
    for another model may not exist for this one)."""
    if picked in variants:
        return picked
    return own_kind if own_kind in variants else next(iter(variants))


@dataclass(frozen=True)
class Fit:
    """The bill at ``at`` tokens against ``gpu_gib``; ``longest`` is None when no context length is
    too long (windows and a bounded prefill chunk) and 0 when not even one token fits."""

    longest: int | None
    at: int
    bill: memory.MemoryBill
    gpu_gib: float

    @property
    def free_gib(self) -> float:
        return (self.gpu_gib * memory.GIB - self.bill.total) / memory.GIB

    @property
    def weights_fit(self) -> bool:
        return self.bill.weights <= self.gpu_gib * memory.GIB


def fit(model: MemoryModel, lengths: Sequence[int], gpu_gib: float, **settings) -> Fit:
    """Summed up at the longest context that fits, else at the model's own context, else at the
    longest length charted, whichever is shortest."""
    longest = longest_context(model, gpu_gib, **settings)
    at = min(n for n in (longest or None, model.max_context, lengths[-1]) if n is not None)
    return Fit(longest, at, memory.memory_bill(model, at, **settings), gpu_gib)


# ---- what fits beside the weights ------------------------------------------------------------------
@dataclass(frozen=True)
class ContextFit:
    """The longest context whose KV cache fits next to the weights. ``max_tokens`` None: the cache
    stops growing (a window on every layer) before it fills the memory, so KV memory sets no limit."""

    gpu_bytes: int
    weight_bytes: int
    free_bytes: int  # after weights and reserve; negative when the weights alone do not fit
    max_tokens: int | None
    model_max_context: int | None
    note: str

    @property
    def unbounded_by_kv(self) -> bool:
        return self.max_tokens is None

    @property
    def usable_tokens(self) -> int | None:
        """What fits and what the model was built for, whichever is shorter (None: neither limits)."""
        limits = [n for n in (self.max_tokens, self.model_max_context) if n is not None]
        return min(limits) if limits else None

    def to_dict(self) -> dict:
        return {**self.__dict__, "unbounded_by_kv": self.unbounded_by_kv, "usable_tokens": self.usable_tokens}


def _longest_fit(model: MemoryModel, free_bytes: int, batch: int, kv_dtype: str) -> int | None:
    """Largest t whose cache (K and V kept, plus any fixed state) fits ``free_bytes``; None if the cache stops
    growing (every layer keeps a window or no K/V at all) below it."""
    def fits(tokens: int) -> bool:
        return memory.kv_cache_bytes_at(model, tokens, batch, kv_dtype) <= free_bytes

    if not any(group.grows for group in model.layer_groups):
        widest = max((group.window for group in model.layer_groups if group.caches_kv), default=1)
        if fits(widest):
            return None
    if not fits(1):
        return 0
    low, high = 1, 2  # the cache grows with t: double until it no longer fits, then halve the gap
    while fits(high):
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def max_context(spec: Spec, gpu_gib: float, *, batch: int = 1, kv_dtype: str = "bf16",
                weight_dtype: str = "bf16", reserve_gib: float = 0.0) -> ContextFit:
    """Longest context for ``batch`` sequences on a GPU of ``gpu_gib`` GiB, after the weights and a
    ``reserve_gib`` for activations and the runtime (which a real server also needs)."""
    model = as_memory_model(spec)
    if not (0 < gpu_gib < math.inf and 0 <= reserve_gib < math.inf) or batch < 1:
        raise ValueError(f"need gpu_gib > 0, batch >= 1, reserve_gib >= 0; got {gpu_gib}, {batch}, {reserve_gib}")
    gpu, weights = int(gpu_gib * memory.GIB), memory.weight_bytes(model, weight_dtype)
    free = gpu - int(reserve_gib * memory.GIB) - weights
    memory.dtype_bits(kv_dtype)  # an unknown dtype is refused by name
    tokens = 0 if free < 0 else _longest_fit(model, free, batch, kv_dtype)
    return ContextFit(gpu, weights, free, tokens, model.max_context,
                      _fit_note(model, weights, free, tokens, batch, kv_dtype))


def _fit_note(model: MemoryModel, weights: int, free: int, tokens: int | None, batch: int, kv_dtype: str) -> str:
    trained = f" (it was built for {model.max_context:,})" if model.max_context else ""
    if free < 0:
        return f"The weights alone ({weights / memory.GIB:.1f} GiB) do not fit."
    if tokens is None:
        widest = max(group.window for group in model.layer_groups if group.caches_kv and group.window) \
            if model.kv_layers else 1
        cap = memory.kv_cache_bytes_at(model, widest, batch, kv_dtype)
        kept = f"only the last {widest:,} tokens" if model.kv_layers == model.n_layers else \
            f"at most its last {widest:,} tokens or a fixed state"
        return (f"Every layer keeps {kept}, so the {kv_dtype} cache "
                f"stops growing at {cap / memory.GIB:.2f} GiB: context length is unbounded by KV memory, "
                f"though each layer sees only its window{trained}.")
    windows = ""
    if model.n_window_layers and tokens > model.sliding_window:
        windows = (f" ({model.n_window_layers} of {model.n_layers} layer{'s' * (model.n_layers != 1)} keep"
                   f"{'s' * (model.n_window_layers == 1)} only {model.sliding_window:,})")
    return (f"Weights take {weights / memory.GIB:.1f} GiB; the {free / memory.GIB:.1f} GiB left hold {tokens:,} tokens "
            f"per sequence of {kv_dtype} KV cache for a batch of {batch}{windows}{trained}.")


def longest_context(spec: Spec, gpu_gib: float, *, limit: int = 1 << 40, **settings) -> int | None:
    """Largest context whose whole bill (weights + KV + activations) fits ``gpu_gib`` GiB; None when even
    ``limit`` tokens fit (windows on every layer and a bounded prefill chunk stop the growth)."""
    if not 0 < gpu_gib < math.inf:
        raise ValueError(f"gpu_gib must be positive and finite, got {gpu_gib}")
    gpu = int(gpu_gib * memory.GIB)
    if memory.memory_bill(spec, limit, **settings).total <= gpu:
        return None
    low, high = 0, limit  # bill(low) fits (or low is 0), bill(high) does not: the total grows with tokens
    if memory.memory_bill(spec, 0, **settings).total > gpu:
        return 0
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if memory.memory_bill(spec, middle, **settings).total <= gpu else (low, middle)
    return low
