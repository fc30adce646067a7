"""The circuit graph: which edges exist, and the names that address them."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import tiny_config
from txviz.circuit.graph import CircuitGraph


def test_edges_of_a_sequential_block_count_every_earlier_source():
    graph = CircuitGraph(tiny_config(n_layers=3, n_heads=4))
    h = 4
    heads = sum(3 * h * (1 + layer * (h + 1)) for layer in range(3))  # q, k, v of each head read earlier layers
    mlps = sum(1 + layer * (h + 1) + h for layer in range(3))  # the MLP also reads its own layer's heads
    assert graph.n_edges == heads + mlps + len(graph.sources)  # the logits read everything
    assert len(graph.sources) == 1 + 3 * (h + 1) and len(graph.targets) == 3 * (3 * h + 1) + 1


def test_a_parallel_blocks_mlp_does_not_read_its_own_layer():
    sequential = CircuitGraph(tiny_config(n_layers=2, n_heads=4))
    parallel = CircuitGraph(tiny_config(n_layers=2, n_heads=4, parallel_block=True))
    row, head = sequential.target_index("m1"), sequential.source_index("a1.h0")
    assert sequential.valid[row, head] and not parallel.valid[row, head]
    assert sequential.n_edges - parallel.n_edges == 2 * 4


def test_edges_by_name_round_trip_and_later_sources_are_refused():
    graph = CircuitGraph(tiny_config(n_layers=2, n_heads=4, n_kv_heads=2))
    edges = [("a0.h1", "a1.h3", "k"), ("embed", "logits", None), ("m0", "a1.h0", "v")]
    mask = graph.edge_mask(edges)
    assert int(mask.sum()) == 3
    assert {(e.source, e.target, e.input) for e in graph.edges_of(mask)} == set(edges)
    with pytest.raises(ValueError):
        graph.edge_mask([("a1.h0", "a1.h2", "q")])  # a head does not read its own layer
    with pytest.raises(KeyError):
        graph.edge_mask([("a0.h0", "m1", "q")])  # an MLP has no query input
    assert torch.equal(graph.valid[graph.target_index("a1.h2", "k")], graph.valid[graph.target_index("a1.h0", "q")])


def test_a_qk_norm_across_all_heads_has_the_same_graph_and_is_marked_for_the_run():
    """OLMo 2's QK-norm reads every head's rows: the graph's nodes and edges are those of any model of the
    same shape, and the graph tells the run to project each head's q and k inputs through every head's rows."""
    from tests.helpers.tiny import FAMILY_VARIANTS

    olmo2 = CircuitGraph(tiny_config(**FAMILY_VARIANTS["olmo2_like"]))
    qwen3 = CircuitGraph(tiny_config(**FAMILY_VARIANTS["qwen3_like"]))  # per head: the head's own rows
    assert olmo2.qk_norm_across_heads and not qwen3.qk_norm_across_heads
    assert olmo2.sources == qwen3.sources and olmo2.targets == qwen3.targets
