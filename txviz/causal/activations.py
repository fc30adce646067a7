"""Reading a model's activations at the edit points (txviz.model.recording.EDIT_POINTS) during one call.

The interventions of this package swap tensors at the edit points; to patch one run's activation into
another (activation patching: Meng et al. 2022; Wang et al. 2022, IOI; Heimersheim & Nanda 2024), the
source run's tensors at those points are needed first. ``ActivationRecorder`` keeps them as they pass,
changing nothing; ``GradientProbe`` adds a zero tensor that requires grad at each point, so one backward
pass gives ∂metric/∂activation everywhere (attribution patching, Nanda 2023) without hooks or
parameter gradients.
"""

from __future__ import annotations

from typing import Iterable

import torch

from txviz.model.recording import EDIT_POINTS, NULL_LAYER_RECORDER, NullLayerRecorder

Activations = dict[tuple[int, str], torch.Tensor]  # (layer, edit point) → tensor


def check_points(points: Iterable[str]) -> frozenset[str]:
    points = frozenset(points)
    unknown = points - set(EDIT_POINTS)
    if unknown:
        raise ValueError(f"unknown edit points {sorted(unknown)}; known: {sorted(EDIT_POINTS)}")
    return points


class _KeepingLayer(NullLayerRecorder):
    """One layer's view: wants no capture (the fused attention path stays), keeps edit-point tensors."""

    def __init__(self, layer: int, keep):
        self._layer, self._keep = layer, keep

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        return self._keep(self._layer, name, tensor)


class ActivationRecorder:
    """Keeps the tensors at ``points`` (all layers), detached unless ``attached``; changes nothing."""

    def __init__(self, points: Iterable[str], *, attached: bool = False):
        self.points, self.attached = check_points(points), attached
        self.activations: Activations = {}

    def _keep(self, layer: int, name: str, tensor: torch.Tensor) -> torch.Tensor:
        if name in self.points:
            self.activations[layer, name] = tensor if self.attached else tensor.detach()
        return tensor

    def layer(self, index: int):
        return _KeepingLayer(index, self._keep) if self.points else NULL_LAYER_RECORDER

    def globals(self, ctx, positions) -> None:
        pass

    def residual(self, index: int, x: torch.Tensor) -> None:
        pass


class GradientProbe(ActivationRecorder):
    """Adds a zero that requires grad at each point: ``probes[(layer, point)].grad`` after a backward
    pass is ∂metric/∂activation; ``activations`` holds the (detached) activations themselves."""

    def __init__(self, points: Iterable[str]):
        super().__init__(points)
        self.probes: Activations = {}

    def _keep(self, layer: int, name: str, tensor: torch.Tensor) -> torch.Tensor:
        if name not in self.points:
            return tensor
        self.activations[layer, name] = tensor.detach()
        probe = torch.zeros_like(tensor, requires_grad=True)
        self.probes[layer, name] = probe
        return tensor + probe


@torch.no_grad()
def run_with_activations(model, ids: torch.Tensor, points: Iterable[str], *,
                         last_only: bool = False) -> tuple[torch.Tensor, Activations]:
    """(logits (B, T, V), or (B, 1, V) with ``last_only``, activations at ``points``) of one plain call.
    A caller that reads no logit but the last asks for ``last_only``: the activations are the same."""
    recorder = ActivationRecorder(points)
    logits = model(ids, record=recorder, last_only=last_only)
    return logits, recorder.activations
