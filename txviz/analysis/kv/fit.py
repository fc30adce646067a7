"""Whether a model fits a GPU, in the calculator's terms (seed §5.2): the attention kind to show, and
the one context length at which the whole bill (weights + KV cache + activations) is summed up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from txviz.analysis.kv import memory


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


def fit(model: memory.MemoryModel, lengths: Sequence[int], gpu_gib: float, **settings) -> Fit:
    """Summed up at the longest context that fits, else at the model's own context, else at the
    longest length charted, whichever is shortest."""
    longest = memory.longest_context(model, gpu_gib, **settings)
    at = min(n for n in (longest or None, model.max_context, lengths[-1]) if n is not None)
    return Fit(longest, at, memory.memory_bill(model, at, **settings), gpu_gib)
