"""Circuits between heads: which heads feed which, through their queries, keys or values, and why a
head attends where it does.

* ``graph``: nodes (embeddings, every head with its q, k, v inputs, every MLP or MoE block, the
  logits) and the edges between them;
* ``runner``: the decoder run node by node, with any set of edges patched from the corrupt run;
* ``pair``: the clean and corrupt runs of one prompt pair, made once and reused;
* ``patching``: exact edge patching, faithfulness, its curve over circuit sizes, the smallest circuit;
* ``eap``: edge attribution patching (EAP) and its integrated-gradients form (EAP-IG);
* ``qk``: a head's pre-softmax score split into (query-side node, key-side node) pairs, and its value side.

References: Conmy et al. 2023 (ACDC); Syed et al. 2023 (edge attribution patching); Hanna et al. 2024
("Have Faith in Faithfulness", EAP-IG); Elhage et al. 2021 ("A Mathematical Framework", Q/K/V-composition).
Nothing is left on the model: every call builds what it needs and returns it.
"""

from txviz.circuit.eap import eap, eap_ig
from txviz.circuit.graph import CircuitGraph, Edge
from txviz.circuit.metric import LogitDiff, LogProb, make_metric
from txviz.circuit.pair import CircuitPair
from txviz.circuit.patching import faithfulness, faithfulness_curve, patched_metric, smallest_circuit, top_edges
from txviz.circuit.qk import QKBreakdown, qk_attribution

__all__ = ["CircuitGraph", "CircuitPair", "Edge", "LogProb", "LogitDiff", "QKBreakdown", "eap", "eap_ig",
           "faithfulness", "faithfulness_curve", "make_metric", "patched_metric", "qk_attribution",
           "smallest_circuit", "top_edges"]
