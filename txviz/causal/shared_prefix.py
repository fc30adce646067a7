"""What every variant of a batch shares with the unedited (clean) run, so it is computed once.

A variant only changes the run from its first edited layer on (earlier layers: ``Decoder.resume``), and
in a causal model only from its first changed position on: patching a site from a counterfactual that
agrees with the clean prompt up to token d leaves positions < d as they were, since the source's
activations there equal the clean ones. Those positions' keys and values are the clean run's at every
layer, so a chunk of variants runs only positions d.. and attends to the clean prefix's cached keys
(``PrefixCache``). A replacement whose source equals the clean activation wherever it writes changes
nothing at all and is dropped (most of the residual grid: every position before the first changed token).
"""

from __future__ import annotations

from dataclasses import dataclass, replace as with_fields
from typing import Sequence

import torch

from txviz.causal.activations import ActivationRecorder, Activations
from txviz.causal.intervention import Replace


class _KeptLayer:
    """One layer's cache during the clean run: attends to the call's own keys and keeps them."""

    def __init__(self):
        self.k = self.v = None

    def update(self, pos: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.k, self.v = k, v  # (1, Hkv, T, D), rotated as attention uses them
        return k, v

    def held_nbytes(self, k_all: torch.Tensor, v_all: torch.Tensor) -> int:
        return k_all.nbytes + v_all.nbytes


class KeepingCache:
    """The KV cache protocol of ``Decoder`` (txviz.model.kv_cache) for one call from position 0 that
    behaves as no cache (keys are the queries) but keeps every layer's keys and values."""

    seq_len = 0

    def __init__(self, n_layers: int):
        self.layers = [_KeptLayer() for _ in range(n_layers)]

    def layer(self, index: int) -> _KeptLayer:
        return self.layers[index]

    def key_positions(self, q_pos: torch.Tensor, layer: int = 0) -> torch.Tensor:
        return q_pos

    def advance(self, n_new: int) -> None:
        pass


class _PrefixLayer:
    def __init__(self, k: torch.Tensor | None, v: torch.Tensor | None):
        self.k, self.v = k, v

    def update(self, pos: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch = k.shape[0]  # (B, Hkv, T', D): the prefix (1, Hkv, n, D) is every row's
        return (torch.cat([self.k.expand(batch, -1, -1, -1), k], dim=2),
                torch.cat([self.v.expand(batch, -1, -1, -1), v], dim=2))

    def held_nbytes(self, k_all: torch.Tensor, v_all: torch.Tensor) -> int:
        return k_all.nbytes + v_all.nbytes


class PrefixCache:
    """A read-only cache holding the clean run's keys and values of positions 0..n−1 (every layer): a
    call on positions n.. attends to them (sliding windows and ALiBi see the true key positions)."""

    def __init__(self, kept: KeepingCache, n: int):
        self.seq_len = n
        self.layers = [_PrefixLayer(None if layer.k is None else layer.k[:, :, :n],
                                    None if layer.v is None else layer.v[:, :, :n]) for layer in kept.layers]

    def layer(self, index: int) -> _PrefixLayer:
        return self.layers[index]

    def key_positions(self, q_pos: torch.Tensor, layer: int = 0) -> torch.Tensor:
        return torch.cat([torch.arange(self.seq_len, device=q_pos.device), q_pos])

    def advance(self, n_new: int) -> None:
        pass


@dataclass
class CleanRun:
    """One plain call of the prompt: the residual entering each layer (index n_layers: leaving the
    last), the activations at the sources' points, every layer's keys and values, the last logits."""
    entering: dict[int, torch.Tensor]
    activations: Activations
    cache: KeepingCache
    logits: torch.Tensor


class _CleanRecorder(ActivationRecorder):
    def __init__(self, points):
        super().__init__(points)
        self.entering: dict[int, torch.Tensor] = {}

    def residual(self, index: int, x: torch.Tensor) -> None:
        self.entering[index] = x


@torch.no_grad()
def clean_run(model, ids: torch.Tensor, points: Sequence[str] = ()) -> CleanRun:
    """``ids`` (B, T) run once (one prompt, B = 1, for run_variants), keeping what the variants share (see CleanRun)."""
    recorder, cache = _CleanRecorder(points), KeepingCache(model.config.n_layers)
    logits = model(ids, record=recorder, cache=cache, last_only=True)
    return CleanRun(recorder.entering, recorder.activations, cache, logits)


def _changed_positions(replace: Replace, source: Activations, clean: Activations) -> torch.Tensor | None:
    """(T,) True where ``replace`` writes a value other than the clean one; None when that is unknown
    (a mean or zero replacement, or a source of another batch than 1)."""
    site = (replace.layer, replace.point)
    if replace.value != "source" or site not in source or site not in clean or source[site].shape[0] != 1:
        return None
    differs = source[site] != clean[site]  # (1, [H,] T, D)
    if replace.head is not None:
        differs = differs[:, replace.head]
    changed = differs.flatten(0, -3).any(dim=0).any(dim=-1)  # (T,)
    if replace.position is not None:
        changed = torch.zeros_like(changed).index_fill_(0, torch.tensor([replace.position]), changed[replace.position])
    return changed


def drop_no_ops(variants: Sequence[Sequence[Replace]], source: Activations | None,
                clean: Activations) -> list[list[Replace]]:
    """Each variant without the replacements that write the clean value everywhere they write."""
    def no_op(r: Replace) -> bool:
        changed = _changed_positions(r, source or {}, clean)
        return changed is not None and not bool(changed.any())
    return [[r for r in replaces if not no_op(r)] for replaces in variants]


def shared_positions(variants: Sequence[Sequence[Replace]], source: Activations | None, clean: Activations,
                     n_tokens: int) -> int:
    """How many leading positions no variant changes (at most n_tokens − 1: the last one is scored)."""
    shared = n_tokens - 1
    for r in (r for replaces in variants for r in replaces):
        if r.value == "mean":
            return 0  # the mean over positions changes every position
        changed = _changed_positions(r, source or {}, clean)
        first = (r.position or 0) if changed is None else int(changed.int().argmax()) if changed.any() else n_tokens
        shared = min(shared, first)
    return shared


def shifted(variants: Sequence[Sequence[Replace]], source: Activations | None, n: int):
    """The variants and sources as seen by a call on positions n.. (positions and tensors cut by n)."""
    moved = [[r if r.position is None else with_fields(r, position=r.position - n) for r in replaces]
             for replaces in variants]
    cut = None if source is None else {site: t[..., n:, :] for site, t in source.items()}
    return moved, cut
