"""A recorder that keeps what it is asked for *with* gradients, for training losses on internals.

``txviz.capture.trace.Recorder`` detaches and copies to the CPU, because a trace is for looking. Training
the router of a Mixture of Experts against the load-balancing loss (txviz.lab.balancing) needs the
router logits still attached to the graph. This recorder follows the same protocol the Decoder
calls (``layer(i)`` → ``wanted`` / ``wants`` / ``__call__`` / ``many``, plus ``globals`` and
``residual``) but keeps the tensors as they are, and only per-layer captures.

    recorder = LiveRecorder(("router_logits", "expert_ids"), model.config.n_layers)
    logits = model(ids, record=recorder)
    recorder["router_logits"]      # one (B, T, E) tensor per layer, part of the autograd graph
"""

from __future__ import annotations

from typing import Iterable

import torch

from txviz.capture.trace import LAYER_CAPTURES, CaptureError


class LiveLayerRecorder:
    """The view one layer gets: keeps a wanted tensor as it is (no detach, no copy)."""

    def __init__(self, store: dict, wanted: frozenset[str]):
        self._store, self._wanted = store, wanted

    def wants(self, name: str) -> bool:
        return name in self._wanted

    @property
    def wanted(self) -> frozenset[str]:
        return self._wanted

    def __call__(self, name: str, tensor: torch.Tensor) -> None:
        if name in self._wanted:
            self._store[name] = tensor

    def many(self, **tensors: torch.Tensor) -> None:
        for name, tensor in tensors.items():
            self(name, tensor)

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor  # looks only: interventions are txviz.causal's


class LiveRecorder:
    """One forward call's per-layer captures, kept attached to the autograd graph."""

    def __init__(self, capture: Iterable[str], n_layers: int):
        names = frozenset(capture)
        unknown = names - set(LAYER_CAPTURES)
        if unknown:
            raise CaptureError(f"LiveRecorder keeps per-layer captures only; unknown {sorted(unknown)}, "
                               f"known: {sorted(LAYER_CAPTURES)}")
        self.names = names
        self._per_layer: list[dict[str, torch.Tensor]] = [{} for _ in range(n_layers)]

    def layer(self, index: int) -> LiveLayerRecorder:
        return LiveLayerRecorder(self._per_layer[index], self.names)

    def globals(self, ctx, positions) -> None:  # the protocol's global and residual points: not kept
        pass

    def residual(self, index: int, x: torch.Tensor) -> None:
        pass

    def __getitem__(self, name: str) -> list[torch.Tensor]:
        """The tensors ``name`` got, one per layer that offered it (MoE layers for router captures)."""
        if name not in self.names:
            raise CaptureError(f"{name!r} was not asked for; asked: {sorted(self.names)}")
        return [layer[name] for layer in self._per_layer if name in layer]
