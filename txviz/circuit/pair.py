"""The two plain runs a circuit of one prompt pair is measured against, made once for every method.

EAP differentiates at the clean run and multiplies by (corrupt − clean) outputs; EAP-IG, exact edge
patching and the faithfulness curve all patch from the corrupt run's outputs and normalize by the two
runs' metrics; the query–key breakdown reads the clean run's outputs. Each run is made when first asked
for and kept here, on this object, not on the model (nothing is left on the model).
"""

from __future__ import annotations

from functools import cached_property

import torch

from txviz.circuit.graph import CircuitGraph
from txviz.circuit.runner import GraphRun, run_graph


def as_ids(ids) -> torch.Tensor:
    ids = torch.as_tensor(ids)
    ids = ids[None] if ids.dim() == 1 else ids
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"one prompt of token ids, (T,) or (1, T), got shape {tuple(ids.shape)}")
    return ids


class CircuitPair:
    """A clean prompt, a corrupt one of the same token length, and the metric (txviz.circuit.metric)."""

    def __init__(self, model, clean_ids, corrupt_ids, metric):
        self.model, self.metric = model, metric
        self.clean_ids, self.corrupt_ids = as_ids(clean_ids), as_ids(corrupt_ids)
        if self.clean_ids.shape != self.corrupt_ids.shape:
            raise ValueError(f"the clean prompt has {self.clean_ids.shape[1]} tokens and the corrupt one "
                             f"{self.corrupt_ids.shape[1]}: patching needs the same token length")
        self.graph = CircuitGraph(model.config)

    @cached_property
    def same_until(self) -> int:
        """The first position where the prompts differ: every node's output before it is the same in
        both runs (causal attention), so patching changes nothing there."""
        differs = (self.clean_ids != self.corrupt_ids)[0]
        return int(differs.int().argmax()) if bool(differs.any()) else self.clean_ids.shape[1]

    @cached_property
    def clean(self) -> GraphRun:
        with torch.no_grad():
            return run_graph(self.model, self.graph, self.clean_ids, keep_outputs=True)

    @cached_property
    def corrupt(self) -> GraphRun:
        with torch.no_grad():
            return run_graph(self.model, self.graph, self.corrupt_ids, keep_outputs=True)

    @property
    def clean_metric(self) -> float:
        return float(self.metric(self.clean.logits)[0])

    @property
    def corrupt_metric(self) -> float:
        return float(self.metric(self.corrupt.logits)[0])

    @cached_property
    def output_change(self) -> torch.Tensor:
        """(sources, T, d): corrupt − clean output of every source, what patching an edge puts in."""
        return (self.corrupt.outputs - self.clean.outputs)[0]
