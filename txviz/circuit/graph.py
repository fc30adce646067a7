"""The computational graph of a decoder at the level of heads and MLPs, as circuit discovery sees it.

Nodes that write into the residual stream (*sources*), in the order the model computes them:

    embed · a0.h0 … a0.h{H−1} · m0 · a1.h0 … · m{L−1}

and nodes that read from it (*targets*): each head's query, key and value inputs, each MLP (or MoE
block), and the logits. The residual stream entering a node is the sum of the outputs of every source
computed before it, so an edge u → v is a pair (source u, target v) with u earlier than v, and patching
it changes v's input alone (Conmy et al. 2023, ACDC; Syed et al. 2023; Hanna et al. 2024, EAP-IG).

Order within a layer: a sequential block's MLP reads its own layer's heads; a parallel block's (GPT-NeoX)
does not; a head never reads its own layer. So the sources a target may read are always a *prefix* of
the source list, and the graph is a dense (targets × sources) matrix whose row v is valid up to
``n_sources[v]``: scores and patch masks are tensors of that shape.

Grouped-query attention: a KV head's key and value are one function of the residual stream shared by
its g query heads. Here every query head has its own k and v inputs (the split TransformerLens makes when
it ungroups grouped-query attention, which the EAP-IG code follows), so an edge into head h's keys
changes the keys h reads and not those of its group mates. With no edge patched the g copies are equal,
so the clean and corrupt runs are the model's own.

A QK-norm over all heads at once (OLMo 2, OLMoE) normalizes the whole query projection, every head's
rows together, so in the model each head's query depends on every head's part of it. The same rule
as for the pre-attention norm, which is applied to each head's own input copy, extends to it: head
h's query is the QK-norm of the whole query projection of head h's own input, of which head h's rows
are kept; its key the same through every KV head's rows, normed across the KV heads, KV head
h // g's rows kept. With no edge patched every copy is the same residual stream, so the run is the
model's own; an edge patched into head h's query changes head h's query alone, through the norm's
statistic as the model would compute it from that input, and leaves every other head's query as it
was. A per-head QK-norm is the case where the norm reads the head's own rows only, so only those are
projected; an across-heads norm makes each head project through all of them (``qk_norm_across_heads``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import torch

from txviz.config import ModelConfig

Input = Literal["q", "k", "v"]
HEAD_INPUTS: tuple[Input, ...] = ("q", "k", "v")


@dataclass(frozen=True)
class Target:
    node: str  # "a{L}.h{H}", "m{L}" or "logits"
    input: Input | None  # which input of a head; None for an MLP or the logits
    layer: int  # n_layers for the logits
    n_sources: int  # the sources before it: row v of the graph's matrices is valid up to here


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    input: Input | None

    def to_dict(self) -> dict:
        return {"source": self.source, "target": self.target, "input": self.input}


def qk_norm_across_heads(config: ModelConfig) -> bool:
    """Whether the QK-norm normalizes every head's query (and key) together, so that each head's query
    and key input is projected through every head's rows before the norm (the rule above)."""
    return bool(config.qk_norm) and config.qk_norm_scope == "all_heads"


class CircuitGraph:
    """Sources, targets and edges of one model's config; no tensors of the model."""

    def __init__(self, config: ModelConfig):
        self.n_layers, self.n_heads = config.n_layers, config.n_heads
        self.parallel = config.parallel_block
        self.qk_norm_across_heads = qk_norm_across_heads(config)
        h = self.n_heads
        self.sources: tuple[str, ...] = ("embed",) + tuple(
            name for layer in range(self.n_layers) for name in [f"a{layer}.h{i}" for i in range(h)] + [f"m{layer}"])
        targets = []
        for layer in range(self.n_layers):
            before = self.layer_start(layer)
            targets += [Target(f"a{layer}.h{i}", kind, layer, before) for kind in HEAD_INPUTS for i in range(h)]
            targets.append(Target(f"m{layer}", None, layer, before if self.parallel else before + h))
        targets.append(Target("logits", None, self.n_layers, len(self.sources)))
        self.targets: tuple[Target, ...] = tuple(targets)
        self._source_index = {name: i for i, name in enumerate(self.sources)}
        self._target_index = {(t.node, t.input): i for i, t in enumerate(self.targets)}

    # ---- indices ----------------------------------------------------------------------------------
    def layer_start(self, layer: int) -> int:
        """Index of layer ``layer``'s first head among the sources: how many sources come before it."""
        return 1 + layer * (self.n_heads + 1)

    def head_source(self, layer: int, head: int) -> int:
        return self.layer_start(layer) + head

    def mlp_source(self, layer: int) -> int:
        return self.layer_start(layer) + self.n_heads

    def layer_targets(self, layer: int) -> slice:
        """Rows of layer ``layer``'s targets: its heads' q (H), k (H), v (H) inputs, then its MLP."""
        width = 3 * self.n_heads + 1
        return slice(layer * width, (layer + 1) * width)

    @property
    def logits_target(self) -> int:
        return len(self.targets) - 1

    def source_index(self, name: str) -> int:
        if name not in self._source_index:
            raise KeyError(f"no source node {name!r}; sources are embed, a<layer>.h<head>, m<layer>")
        return self._source_index[name]

    def target_index(self, node: str, input: Input | None = None) -> int:
        if (node, input) not in self._target_index:
            raise KeyError(f"no target ({node!r}, {input!r}); heads take 'q', 'k' or 'v', MLPs and logits None")
        return self._target_index[node, input]

    # ---- edges ------------------------------------------------------------------------------------
    @cached_property
    def valid(self) -> torch.Tensor:
        """(targets, sources) True where the source comes before the target: the graph's edges."""
        limits = torch.tensor([t.n_sources for t in self.targets])
        return torch.arange(len(self.sources))[None, :] < limits[:, None]

    @property
    def n_edges(self) -> int:
        return int(self.valid.sum())

    def edge(self, target: int, source: int) -> Edge:
        t = self.targets[target]
        if source >= t.n_sources:
            raise IndexError(f"{self.sources[source]} does not come before {t.node}")
        return Edge(self.sources[source], t.node, t.input)

    def edge_mask(self, edges) -> torch.Tensor:
        """(targets, sources) bool, True at each of ``edges`` (Edge objects or (source, target, input))."""
        mask = torch.zeros(self.valid.shape, dtype=torch.bool)
        for e in edges:
            source, target, input = (e.source, e.target, e.input) if isinstance(e, Edge) else e
            row, col = self.target_index(target, input), self.source_index(source)
            if not self.valid[row, col]:
                raise ValueError(f"{source} does not come before {target}: no such edge")
            mask[row, col] = True
        return mask

    def edges_of(self, mask: torch.Tensor) -> list[Edge]:
        rows, cols = torch.nonzero(mask & self.valid, as_tuple=True)
        return [self.edge(int(r), int(c)) for r, c in zip(rows, cols)]
