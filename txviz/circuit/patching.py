"""Exact edge patching: the clean run with a set of edges patched from the corrupt run, many sets side
by side in one batched call, and what it measures about a circuit.

A circuit is a set of edges kept clean; every other edge of the graph is patched. Its faithfulness

    (metric(circuit) − metric(corrupt)) / (metric(clean) − metric(corrupt))

is evaluated by running it, not estimated: 1 when the circuit alone carries the clean behaviour, 0 when it
carries none of it (Hanna et al. 2024, "Have Faith in Faithfulness"; Conmy et al. 2023, ACDC). With no edge
kept the run is the corrupt one, with every edge kept the clean one. Circuits are taken as the top n
edges by |score| (EAP or EAP-IG, txviz.circuit.eap); the curve runs them for several n, and the smallest
circuit reaching a target is searched from the curve's bracket inwards.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from txviz.circuit.pair import CircuitPair
from txviz.circuit.runner import run_graph

CHUNK = 8  # patched runs per batched call: memory grows with it, time per run hardly shrinks beyond


@torch.no_grad()
def patched_metric(pair: CircuitPair, patch: torch.Tensor, chunk: int = CHUNK) -> torch.Tensor:
    """(B,) the metric of each run with edges ``patch`` (B, targets, sources) patched (ε in [0, 1])."""
    patch = patch[None] if patch.dim() == 2 else patch
    values = []
    for start in range(0, patch.shape[0], chunk):
        rows = patch[start:start + chunk] & pair.graph.valid if patch.dtype == torch.bool \
            else patch[start:start + chunk] * pair.graph.valid
        run = run_graph(pair.model, pair.graph, pair.clean_ids, patch=rows, corrupt=pair.corrupt.outputs,
                        same_until=pair.same_until)
        values.append(pair.metric(run.logits))
    return torch.cat(values)


def faithfulness(pair: CircuitPair, circuits: torch.Tensor, chunk: int = CHUNK) -> torch.Tensor:
    """(B,) the faithfulness of each circuit (B, targets, sources) bool: its edges clean, all others patched."""
    circuits = circuits[None] if circuits.dim() == 2 else circuits
    if pair.clean_metric == pair.corrupt_metric:
        raise ValueError(f"the clean and corrupt runs both score {pair.clean_metric:.6g}: no behaviour to restore, "
                         "so faithfulness is undefined (pick a corrupt prompt that changes the answer)")
    metric = patched_metric(pair, pair.graph.valid & ~circuits, chunk)
    return (metric - pair.corrupt_metric) / (pair.clean_metric - pair.corrupt_metric)


def top_edges(pair_or_graph, scores: torch.Tensor, n: int) -> torch.Tensor:
    """(targets, sources) bool: the n valid edges of largest |score| (ties broken by edge order)."""
    graph = getattr(pair_or_graph, "graph", pair_or_graph)
    flat = torch.where(graph.valid, scores.abs().float(), torch.tensor(-1.0)).flatten()
    mask = torch.zeros_like(flat, dtype=torch.bool)
    mask[flat.argsort(descending=True, stable=True)[:n]] = True
    return mask.view(scores.shape) & graph.valid


def curve_sizes(n_edges: int, points: int = 10, smallest: int = 10) -> list[int]:
    """0 edges, then ``points`` − 1 sizes spaced geometrically from ``smallest`` to every edge."""
    if points < 2:
        raise ValueError(f"a curve needs at least 2 points (none and all edges), got {points}")
    low = min(smallest, n_edges)
    steps = points - 1
    sizes = [round(low * (n_edges / low) ** (k / (steps - 1))) if steps > 1 else n_edges for k in range(steps)]
    return sorted(set([0] + sizes + [n_edges]))


def faithfulness_curve(pair: CircuitPair, scores: torch.Tensor, sizes: Sequence[int] | None = None,
                       points: int = 10, chunk: int = CHUNK) -> list[dict]:
    """[{edges, faithfulness}] for the top-n circuits by |score|, n in ``sizes`` (``curve_sizes`` by default)."""
    sizes = list(sizes) if sizes is not None else curve_sizes(pair.graph.n_edges, points)
    circuits = torch.stack([top_edges(pair, scores, n) for n in sizes])
    values = faithfulness(pair, circuits, chunk)
    return [{"edges": int(n), "faithfulness": float(f)} for n, f in zip(sizes, values)]


def smallest_circuit(pair: CircuitPair, scores: torch.Tensor, target: float = 0.8, *, probes: int = CHUNK,
                     curve: list[dict] | None = None, on_batch: Callable[[], None] | None = None) -> dict:
    """The fewest top edges whose circuit reaches faithfulness ``target``: the first point of the curve
    that reaches it, then the bracket before it narrowed by ``probes`` evenly spaced sizes per batched
    call until it is one edge wide. Faithfulness need not grow with n, so this is the first crossing
    found from the curve's bracket, measured exactly; ``edges`` is None when no size reaches the target.
    Returns {edges, faithfulness, circuit (bool mask), curve}. ``on_batch()`` after each round (a progress bar)."""
    curve = curve if curve is not None else faithfulness_curve(pair, scores)
    reached = [point for point in curve if point["faithfulness"] >= target]
    if not reached:
        return {"edges": None, "faithfulness": None, "circuit": None, "curve": curve}
    high = reached[0]
    low = max((p["edges"] for p in curve if p["edges"] < high["edges"]), default=0)
    best = high
    while best["edges"] - low > 1:
        sizes = sorted({math.ceil(low + (best["edges"] - low) * k / (probes + 1)) for k in range(1, probes + 1)}
                       - {low, best["edges"]})
        if not sizes:
            break
        points = faithfulness_curve(pair, scores, sizes)
        if on_batch is not None:
            on_batch()
        hit = next((p for p in points if p["faithfulness"] >= target), None)
        below = [p["edges"] for p in points if p["faithfulness"] < target and (hit is None or p["edges"] < hit["edges"])]
        low = max(below, default=low)
        best = hit or best
    return {"edges": best["edges"], "faithfulness": best["faithfulness"],
            "circuit": top_edges(pair, scores, best["edges"]), "curve": curve}
