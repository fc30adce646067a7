"""The circuit of one prompt pair and the query–key breakdown of one attention score, as
``txviz circuit --json`` and ``txviz qk --json`` print them and the app's Circuit tab shows them.

A circuit report: both prompts encoded with the same BOS policy, the two words scored as ``txviz patch``
scores them (their first token after a space, txviz.causal.metric.answer_tokens), every edge scored by
EAP-IG (txviz.circuit.eap), the faithfulness of the top-n circuits measured exactly for n from 0 edges to
all of them (txviz.circuit.patching), and the chosen circuit: the top ``edges`` edges when asked, else the
smallest one reaching ``target``. Token indices are those of ``txviz trace``: the prompt's tokens after
the prepended BOS or sink token, which is index 0 when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from txviz.causal.metric import answer_tokens
from txviz.circuit.cost import circuit_passes
from txviz.circuit.eap import eap_ig
from txviz.circuit.graph import CircuitGraph
from txviz.circuit.metric import LogitDiff
from txviz.circuit.pair import CircuitPair
from txviz.circuit.patching import CHUNK, curve_sizes, faithfulness_curve, smallest_circuit, top_edges
from txviz.circuit.qk import qk_attribution

STEPS = ("the clean and corrupt runs", "EAP-IG", "the faithfulness curve", "the smallest circuit")
DEFAULT_TARGET = 0.8


def ranked_edges(graph: CircuitGraph, scores: torch.Tensor, n: int) -> list[dict]:
    """The ``n`` valid edges of largest |score|, largest first: {source, target, input, score}."""
    flat = torch.where(graph.valid, scores.abs().float(), torch.tensor(-1.0)).flatten()
    order = flat.argsort(descending=True, stable=True)[:min(n, graph.n_edges)]
    n_sources = scores.shape[1]
    return [{**graph.edge(int(i) // n_sources, int(i) % n_sources).to_dict(), "score": float(scores.flatten()[i])}
            for i in order]


@dataclass
class CircuitResult:
    """What one circuit run measured; ``pair`` keeps both runs, so other circuits of it can be measured."""
    pair: CircuitPair
    scores: torch.Tensor  # (targets, sources) EAP-IG
    steps: int
    curve: list[dict]  # [{edges, faithfulness}] from 0 edges to all
    circuit_edges: int | None  # None: no circuit of the curve's sizes reached the target
    circuit_faithfulness: float | None
    target: float | None  # None when the size was asked for


def measure_circuit(model, clean_ids: torch.Tensor, corrupt_ids: torch.Tensor, answer_id: int, wrong_id: int, *,
                    steps: int = 5, edges: int | None = None, target: float = DEFAULT_TARGET, points: int = 10,
                    progress: Callable[[int, int], None] | None = None) -> CircuitResult:
    """EAP-IG scores, the curve and the chosen circuit, announcing each batched call as ``progress(done,
    total)`` (the search's rounds are counted at their most; the last call says total of total)."""
    pair = CircuitPair(model, clean_ids, corrupt_ids, LogitDiff(answer_id, wrong_id))
    if edges is not None and not 0 <= edges <= pair.graph.n_edges:
        raise ValueError(f"a circuit of {edges:,} edges: this model's graph has {pair.graph.n_edges:,} edges")
    sizes = curve_sizes(pair.graph.n_edges, points)
    sizes = sorted(set(sizes) | ({edges} if edges is not None else set()))
    batches = circuit_passes(model.config, clean_ids.shape[-1], steps, points=points, search=edges is None)["batches"]
    total = batches["pair"] + batches["eap_ig"] + -(-len(sizes) // CHUNK) + batches["search"]
    done = 0

    def tick() -> None:
        nonlocal done
        done = min(done + 1, total - 1)
        if progress is not None:
            progress(done, total)

    if progress is not None:
        progress(0, total)
    with torch.no_grad():
        pair.clean, pair.corrupt  # noqa: B018  made once here, reused by every step
    tick()
    scores = eap_ig(pair, steps, on_batch=tick)
    curve = []
    for start in range(0, len(sizes), CHUNK):
        curve += faithfulness_curve(pair, scores, sizes[start:start + CHUNK])
        tick()
    if edges is not None:
        chosen = next(p for p in curve if p["edges"] == edges)
        result = CircuitResult(pair, scores, steps, curve, edges, chosen["faithfulness"], None)
    else:
        found = smallest_circuit(pair, scores, target, curve=curve, on_batch=tick)
        result = CircuitResult(pair, scores, steps, curve, found["edges"], found["faithfulness"], target)
    if progress is not None:
        progress(total, total)
    return result


def circuit_json(result: CircuitResult, *, top: int = 50) -> dict:
    """The report's numbers: both metrics, the top ``top`` edges by |score|, the curve, the circuit with its
    edges."""
    pair, graph = result.pair, result.pair.graph
    listed = [] if result.circuit_edges is None else ranked_edges(graph, result.scores, result.circuit_edges)
    clean, corrupt = pair.clean_metric, pair.corrupt_metric
    return {"metric": "logit difference", "clean_metric": clean, "corrupt_metric": corrupt,
            "flips": clean > 0 > corrupt,  # the clean prompt prefers the answer, the corrupt one the wrong word
            "method": "EAP-IG", "steps": result.steps, "n_edges": graph.n_edges,
            "edges": ranked_edges(graph, result.scores, top), "curve": result.curve,
            "circuit": {"n_edges": result.circuit_edges, "faithfulness": result.circuit_faithfulness,
                        "target": result.target, "chosen_by": "size asked" if result.target is None else
                        "smallest top-n circuit reaching the target", "edges": listed}}


def encode_pair(tokenizer, clean: str, corrupt: str, answer: str, wrong: str, bos: str):
    """(clean encoding, corrupt encoding, AnswerTokens), or ValueError saying what to change."""
    for label, text in (("clean", clean), ("corrupt", corrupt)):
        if not text or not text.strip():
            raise ValueError(f"the {label} prompt is empty")
    clean_enc, corrupt_enc = tokenizer.encode(clean, bos=bos), tokenizer.encode(corrupt, bos=bos)
    if len(clean_enc.ids) != len(corrupt_enc.ids):
        raise ValueError(f"the clean prompt has {len(clean_enc.ids)} tokens and the corrupt one {len(corrupt_enc.ids)}: "
                         "edge patching needs the same token length")
    return clean_enc, corrupt_enc, answer_tokens(tokenizer, answer, wrong)


def circuit_report(model, tokenizer, clean: str, corrupt: str, answer: str, wrong: str, *, bos: str = "sink",
                   steps: int = 5, edges: int | None = None, target: float = DEFAULT_TARGET, points: int = 10,
                   top: int = 50, progress: Callable[[int, int], None] | None = None) -> dict:
    clean_enc, corrupt_enc, tokens = encode_pair(tokenizer, clean, corrupt, answer, wrong, bos)
    result = measure_circuit(model, torch.tensor(list(clean_enc.ids)), torch.tensor(list(corrupt_enc.ids)),
                             tokens.answer_id, tokens.wrong_id, steps=steps, edges=edges, target=target,
                             points=points, progress=progress)
    return {**tokens.to_dict(), "bos": bos, "n_tokens": len(clean_enc.ids), "clean_tokens": list(clean_enc.tokens),
            "corrupt_tokens": list(corrupt_enc.tokens), **circuit_json(result, top=top)}


def qk_json(breakdown, tokens, *, top: int = 20) -> dict:
    """``txviz qk``'s numbers: the model's score, the top ``top`` (query node, key node) pairs by |value|, the
    sum of every pair, each side's nodes with their pairs summed (query_side, key_side), and the value
    side's top nodes."""
    n_pairs = breakdown.pairs.numel()
    return {"layer": breakdown.layer, "head": breakdown.head, "query": breakdown.query, "key": breakdown.key,
            "query_token": tokens[breakdown.query], "key_token": tokens[breakdown.key], "score": breakdown.score,
            "capped_score": breakdown.capped_score, "weight": breakdown.weight, "sum": breakdown.sum,
            "n_pairs": n_pairs, "pairs": breakdown.top_pairs(min(top, n_pairs)),
            **side_totals(breakdown, top),
            "value_sum": float(breakdown.value_parts.sum()), "value": breakdown.top_values(top)}


def side_totals(breakdown, top: int) -> dict:
    """{query_side, key_side}: each node's pairs summed over the other side (what it puts into the
    query, or the key, whatever meets it), the ``top`` largest |total| first."""
    def totals(nodes, values: torch.Tensor) -> list[dict]:
        order = values.abs().argsort(descending=True, stable=True)[:top]
        return [{"node": nodes[int(i)], "value": float(values[i])} for i in order]
    return {"query_side": totals(breakdown.query_nodes, breakdown.pairs.sum(1)),
            "key_side": totals(breakdown.key_nodes, breakdown.pairs.sum(0))}


def qk_report(model, tokenizer, prompt: str, layer: int, head: int, query: int, key: int, *, bos: str,
              top: int = 20) -> dict:
    if not prompt or not prompt.strip():
        raise ValueError("the prompt is empty")
    encoding = tokenizer.encode(prompt, bos=bos)
    breakdown = qk_attribution(model, torch.tensor(list(encoding.ids)), layer, head, query, key)
    return {"bos": bos, "n_tokens": len(encoding.ids), "tokens": list(encoding.tokens),
            **qk_json(breakdown, list(encoding.tokens), top=top)}
