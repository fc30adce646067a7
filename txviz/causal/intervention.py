"""Ablation and activation patching, per call: the batch dimension carries the variants.

An ``Intervention`` is a recorder (txviz.model.recording) whose layer views answer ``edit`` with the
tensor changed: variant n of the batch (row n) gets its list of ``Replace``s. A replacement sets one
site (layer, edit point, optionally one head and/or one position) to

* ``"zero"``: zero ablation;
* ``"mean"``: the mean over positions of that row's own activation there (mean ablation over
  positions: no dataset needed; Wang et al. 2022 use means over a reference distribution);
* ``"source"``: the same site's activation in a source run (another prompt of the same token
  length): resample ablation when the source is a random other prompt, activation patching when it is
  the counterfactual (Meng et al. 2022; Heimersheim & Nanda 2024, "How to use and interpret
  activation patching").

Nothing is left on the model: build one per call. It may wrap another recorder (``inner``), which
sees every edited tensor, so one call can both edit and record.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal, Sequence

import torch

from txviz.causal.activations import Activations, check_points
from txviz.model.recording import NULL_RECORDER

Value = Literal["zero", "mean", "source"]
HEAD_POINTS = frozenset({"q", "k", "v", "head_out"})  # (B, heads, T, D); the rest are (B, T, d)


@dataclass(frozen=True)
class Replace:
    layer: int
    point: str  # an edit point (txviz.model.recording.EDIT_POINTS)
    head: int | None = None  # None: every head (head points only)
    position: int | None = None  # None: every position
    value: Value = "source"

    def __post_init__(self) -> None:
        check_points((self.point,))
        if self.head is not None and self.point not in HEAD_POINTS:
            raise ValueError(f"{self.point!r} has no heads; heads exist at {sorted(HEAD_POINTS)}")
        if self.value not in ("zero", "mean", "source"):
            raise ValueError(f"value must be 'zero', 'mean' or 'source', got {self.value!r}")


class _SiteEdit:
    """Every replacement at one (layer, point), as one boolean mask (N, [H,] T, 1) per value."""

    def __init__(self, n_variants: int):
        self.n = n_variants
        self.marks: dict[str, list[tuple[int, Replace]]] = defaultdict(list)

    def add(self, row: int, replace: Replace) -> None:
        self.marks[replace.value].append((row, replace))

    def _mask(self, marks, tensor: torch.Tensor) -> torch.Tensor:
        mask = torch.zeros(self.n, *tensor.shape[1:-1], 1, dtype=torch.bool, device=tensor.device)
        for row, r in marks:
            head = slice(None) if r.head is None else r.head
            where = (row, head) if tensor.dim() == 4 else (row,)
            mask[where + (slice(None) if r.position is None else r.position,)] = True
        return mask

    def apply(self, tensor: torch.Tensor, source: torch.Tensor | None) -> torch.Tensor:
        if tensor.shape[0] != self.n:
            raise ValueError(f"an intervention of {self.n} variants on a batch of {tensor.shape[0]}")
        values = {"zero": lambda: torch.zeros((), dtype=tensor.dtype, device=tensor.device),
                  "mean": lambda: tensor.mean(dim=-2, keepdim=True),
                  "source": lambda: _source(source, tensor)}
        out = tensor
        for value, marks in self.marks.items():
            out = torch.where(self._mask(marks, tensor), values[value](), out)
        return out


def _source(source: torch.Tensor | None, tensor: torch.Tensor) -> torch.Tensor:
    if source is None:
        raise ValueError("a 'source' replacement needs the source run's activations (source=)")
    if source.shape[1:] != tensor.shape[1:]:
        raise ValueError(f"the source activation has shape {tuple(source.shape)}, the run's is "
                         f"{tuple(tensor.shape)}: patching needs prompts of the same token length")
    return source.to(tensor.device, tensor.dtype)


class _EditingLayer:
    """One layer's view: delegates recording to the wrapped recorder's layer, edits at its sites."""

    def __init__(self, inner, edits: dict[str, _SiteEdit], sources: dict[str, torch.Tensor]):
        self._inner, self._edits, self._sources = inner, edits, sources
        self.wanted = inner.wanted

    def wants(self, name: str) -> bool:
        return self._inner.wants(name)

    def __call__(self, name: str, tensor: torch.Tensor) -> None:
        self._inner(name, tensor)

    def many(self, **tensors: torch.Tensor) -> None:
        self._inner.many(**tensors)

    def attention_rows(self, rows, keys, probs, scores) -> None:
        self._inner.attention_rows(rows, keys, probs, scores)

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        site = self._edits.get(name)
        edited = tensor if site is None else site.apply(tensor, self._sources.get(name))
        return self._inner.edit(name, edited)


class Intervention:
    """variants[n]: the replacements of batch row n (an empty list: row n runs unchanged).
    ``source``: the source run's activations (txviz.causal.activations), batch 1 or len(variants)."""

    def __init__(self, variants: Sequence[Sequence[Replace]], source: Activations | None = None, *,
                 inner=NULL_RECORDER):
        self.n_variants, self._inner = len(variants), inner
        self._sources = source or {}
        self._edits: dict[int, dict[str, _SiteEdit]] = defaultdict(dict)
        for row, replaces in enumerate(variants):
            for r in replaces:
                self._edits[r.layer].setdefault(r.point, _SiteEdit(len(variants))).add(row, r)

    def layer(self, index: int) -> _EditingLayer:
        sources = {point: tensor for (layer, point), tensor in self._sources.items() if layer == index}
        return _EditingLayer(self._inner.layer(index), self._edits.get(index, {}), sources)

    def globals(self, ctx, positions) -> None:
        self._inner.globals(ctx, positions)

    def residual(self, index: int, x: torch.Tensor) -> None:
        self._inner.residual(index, x)
