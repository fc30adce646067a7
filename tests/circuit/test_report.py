"""The circuit report's pieces: the edge count the estimate uses, progress per batched call, the ranked
edges."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.circuit_variants import CIRCUIT_VARIANTS
from tests.helpers.induction_circuit import ANSWER, CLEAN, CORRUPT, WRONG, induction_model
from tests.helpers.tiny import FAMILY_VARIANTS, random_decoder, random_ids, tiny_config
from txviz.circuit.cost import circuit_estimate, circuit_passes, n_edges
from txviz.circuit.eap import ig_row_bytes, wide_projection_width
from txviz.circuit.graph import CircuitGraph
from txviz.circuit.runner import run_graph
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


def _run_flops(config, n_tokens: int) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        run_graph(random_decoder(config), CircuitGraph(config), random_ids(config, n_tokens))
    return counter.get_total_flops()


def test_the_wider_projections_counted_are_what_a_run_computes_beyond_a_per_head_norm():
    """OLMo 2's QK-norm across heads (4 heads on 2 KV heads): the run's multiply-adds beyond the same model
    with a per-head norm are each head's q and k inputs through the other (KV) heads' rows."""
    across = tiny_config(**FAMILY_VARIANTS["olmo2_like"])
    per_head = across.replace(qk_norm_scope="head")
    n_tokens = 9
    extra = _run_flops(across, n_tokens) - _run_flops(per_head, n_tokens)
    assert extra > 0 and wide_projection_width(per_head) == 0
    assert extra == 2 * n_tokens * across.n_layers * across.n_heads * across.d_model * wide_projection_width(across)


def test_an_across_heads_qk_norm_is_estimated_to_cost_more_and_a_per_head_one_nothing_more():
    """An OLMo 2 1B-shaped model cut to 4 layers: the same prompt pair under each QK-norm."""
    shape = dict(vocab_size=1000, d_model=2048, n_layers=4, n_heads=16, ffn_hidden=8192, max_seq_len=256,
                 pre_norm=False, sandwich_norm=True, qk_norm=True)
    across, per_head = tiny_config(**shape, qk_norm_scope="all_heads"), tiny_config(**shape, qk_norm_scope="head")
    plain = tiny_config(**{**shape, "qk_norm": False})
    costs = {name: circuit_estimate(c, [1] * 24, [2] * 24, gflops=10.0)
             for name, c in (("across", across), ("per_head", per_head), ("plain", plain))}
    assert costs["across"].seconds > 1.5 * costs["per_head"].seconds and costs["across"].bytes > costs["per_head"].bytes
    assert circuit_passes(per_head, 24, 5) == circuit_passes(plain, 24, 5)
    assert ig_row_bytes(across, 24) > ig_row_bytes(per_head, 24) == ig_row_bytes(plain, 24)  # what a backward holds
