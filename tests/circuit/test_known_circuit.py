"""On a model whose circuit is set by hand (previous-token head → induction head through the keys),
EAP-IG finds it: a small circuit that holds the K-composition edge and restores the clean answer."""

from __future__ import annotations

import torch

from tests.helpers.induction_circuit import ANSWER, CIRCUIT, CLEAN, CORRUPT, K_COMPOSITION, WRONG, induction_model
from txviz.circuit.eap import eap_ig
from txviz.circuit.metric import LogitDiff
from txviz.circuit.pair import CircuitPair
from txviz.circuit.patching import faithfulness, smallest_circuit


def _pair() -> CircuitPair:
    return CircuitPair(induction_model(), CLEAN, CORRUPT, LogitDiff(ANSWER, WRONG))


def test_the_hand_set_model_does_induction():
    pair = _pair()
    assert pair.clean_metric > 5 and pair.corrupt_metric < -5  # each prompt's own answer wins
    assert faithfulness(pair, pair.graph.edge_mask(CIRCUIT))[0] > 0.9


def test_eap_ig_finds_the_k_composition_circuit():
    pair = _pair()
    found = smallest_circuit(pair, eap_ig(pair, steps=5), target=0.8)
    edges = {(e.source, e.target, e.input) for e in pair.graph.edges_of(found["circuit"])}
    assert K_COMPOSITION in edges
    assert found["faithfulness"] >= 0.8
    assert found["edges"] <= 0.1 * pair.graph.n_edges
    assert edges <= set(CIRCUIT)  # nothing from the noise heads


def test_without_the_k_composition_edge_the_circuit_fails():
    pair = _pair()
    without = pair.graph.edge_mask([e for e in CIRCUIT if e != K_COMPOSITION])
    assert faithfulness(pair, without)[0] < 0.6  # the keys no longer find the match: about halfway to corrupt
    assert torch.equal(pair.graph.edge_mask(CIRCUIT) & ~without, pair.graph.edge_mask([K_COMPOSITION]))
