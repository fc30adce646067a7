"""The circuit report's pieces: the edge count the estimate uses, progress per batched call, the ranked
edges."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.circuit_variants import CIRCUIT_VARIANTS
from tests.helpers.induction_circuit import ANSWER, CLEAN, CORRUPT, WRONG, induction_model
from tests.helpers.tiny import tiny_config
from txviz.circuit.cost import circuit_estimate, circuit_passes, n_edges
from txviz.circuit.graph import CircuitGraph
from txviz.circuit.report import measure_circuit, ranked_edges


@pytest.mark.parametrize("variant", sorted(CIRCUIT_VARIANTS))
def test_the_estimate_counts_the_graph_s_edges(variant):
    config = tiny_config(**CIRCUIT_VARIANTS[variant])
    assert n_edges(config) == CircuitGraph(config).n_edges


def test_progress_is_told_per_batched_call_and_ends_at_the_total():
    model = induction_model()
    calls = []
    result = measure_circuit(model, torch.as_tensor(CLEAN), torch.as_tensor(CORRUPT), ANSWER, WRONG, steps=4,
                             progress=lambda done, total: calls.append((done, total)))
    totals = {total for _, total in calls}
    assert len(totals) == 1
    total = totals.pop()
    done = [d for d, _ in calls]
    assert done[0] == 0 and done[-1] == total and done == sorted(done)
    batches = circuit_passes(model.config, len(CLEAN), 4)["batches"]
    assert len(calls) >= 2 + batches["pair"] + batches["eap_ig"] + batches["curve"]  # one call per batched run
    assert result.circuit_faithfulness >= 0.8


def test_ranked_edges_are_the_top_edges_largest_first():
    graph = CircuitGraph(tiny_config())
    scores = torch.randn(graph.valid.shape) * graph.valid
    listed = ranked_edges(graph, scores, 7)
    assert [abs(e["score"]) for e in listed] == sorted((abs(e["score"]) for e in listed), reverse=True)
    assert abs(listed[-1]["score"]) >= float(scores.abs().flatten().sort(descending=True).values[7])
    assert len(ranked_edges(graph, scores, 10 ** 9)) == graph.n_edges


def test_a_longer_pair_is_estimated_to_take_longer():
    config = tiny_config()
    short, long = (circuit_estimate(config, [1] * n, [2] * n, gflops=10.0) for n in (8, 64))
    assert long.seconds > short.seconds and long.bytes > short.bytes
