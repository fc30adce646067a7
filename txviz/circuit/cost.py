"""What a circuit run costs before it runs, as a txviz.limits.Estimate the app and ``txviz circuit`` check
against the same budget (as ``txviz patch`` checks txviz.causal.cost.pair_estimate).

Work is counted in plain forward passes of one prompt, whose seconds txviz.limits.trace_estimate gives
from the model's FLOPs. A graph run (txviz.circuit.runner) costs more than a forward: each head's q, k
and v inputs are normed and projected on their own. The ratios below were measured on SmolLM2-135M and the
24-token trophy pair (CPU seconds, one thread, AMD EPYC): a plain forward 0.15 s, the two graph runs of
the pair 0.46 s, EAP-IG with its 5 steps in one batched forward and backward 2.4–2.9 s, a 10-point curve
2.0 s (the patched runs start at the first position where the prompts differ), the smallest-circuit search
from that curve 4.5 s (4 rounds of 8 runs).

Where the QK-norm spans all heads (OLMo 2, OLMoE) every run also projects each head's q and k inputs
through every head's rows: their FLOPs, in forward passes, are added to every run and once more to each
interpolation step's backward, and their activations to the memory. Counted by FLOPs this is an upper
bound: on an OLMo 2-shaped model (d 512, 8 heads of 64, 8 layers, 55 tokens, one thread, AMD EPYC at load
average about 5) a graph run took 0.6–0.7 forward passes more than with a per-head norm where the FLOPs
say 1.1, the wide products running faster than the forward's small ones.
"""

from __future__ import annotations

import math
from typing import Sequence

from txviz.circuit.eap import WIDE_KEPT, ig_row_bytes, ig_rows, wide_projection_width
from txviz.circuit.patching import CHUNK, curve_sizes

GRAPH_RUN_PASSES = 1.5  # the clean or corrupt graph run, keeping every node's output
IG_STEP_PASSES = 3.5  # one interpolation step: its share of a batched forward and backward
PATCHED_RUN_PASSES = 1.4  # one patched run of the curve or of the search


def n_sources(config) -> int:
    return 1 + config.n_layers * (config.n_heads + 1)


def n_edges(config) -> int:
    """Edges of the head-level graph of ``config`` (txviz.circuit.graph): every target's sources."""
    h, sources = config.n_heads, n_sources(config)
    total = 0
    for layer in range(config.n_layers):
        before = 1 + layer * (h + 1)
        total += 3 * h * before + (before if config.parallel_block else before + h)
    return total + sources


def search_rounds(sizes: Sequence[int], probes: int = CHUNK) -> int:
    """At most this many batched rounds narrow the widest bracket of the curve to one edge."""
    widest = max((b - a for a, b in zip(sizes, sizes[1:])), default=1)
    return math.ceil(math.log(max(widest, 2)) / math.log(probes + 1))


def wide_projection_passes(config, n_tokens: int) -> float:
    """What one graph run computes beyond the ratios above, in forward passes of ``n_tokens``: where the
    QK-norm spans all heads, each head's q and k inputs projected through every (KV) head's rows rather
    than its own (txviz.circuit.runner); 0 elsewhere."""
    from txviz.capture.cost import capture_cost

    extra = 2 * n_tokens * config.n_layers * config.n_heads * config.d_model * wide_projection_width(config)
    return extra / capture_cost(config, n_tokens, ("logits",)).flops if extra else 0.0


def circuit_passes(config, n_tokens: int, steps: int, *, points: int = 10, search: bool = True) -> dict:
    """The runs of one circuit report in batches and in forward passes of one prompt, per part. The
    wider projections of a QK-norm across heads are counted once in every run and once more in each
    step's backward."""
    sizes = curve_sizes(n_edges(config), points)
    rows = ig_rows(config, n_tokens, steps)
    rounds = search_rounds(sizes) if search else 0
    wide = wide_projection_passes(config, n_tokens)
    patched = PATCHED_RUN_PASSES + wide
    return {"batches": {"pair": 1, "eap_ig": math.ceil(steps / rows), "curve": math.ceil(len(sizes) / CHUNK),
                        "search": rounds},
            "passes": {"pair": 2 * (GRAPH_RUN_PASSES + wide), "eap_ig": steps * (IG_STEP_PASSES + 2 * wide),
                       "curve": len(sizes) * patched, "search": rounds * CHUNK * patched}}


def circuit_estimate(config, clean_ids: Sequence[int], corrupt_ids: Sequence[int], *, steps: int = 5,
                     points: int = 10, search: bool = True, element_bytes: int = 4, gflops: float):
    """What ``circuit_report`` takes on this pair: the passes of ``circuit_passes`` at one forward's
    seconds, and the larger of the batched backward of EAP-IG (as many steps as ig_rows lets share it)
    and a chunk of patched runs, on top of the two runs' outputs the report keeps."""
    from txviz import limits

    n_tokens = max(len(list(clean_ids)), 1)
    one = limits.trace_estimate(config, n_tokens, ("logits",), element_bytes=element_bytes, gflops=gflops)
    width = n_tokens * config.d_model * element_bytes
    outputs = n_sources(config) * width  # every node's output at every position, one run
    backward = ig_rows(config, n_tokens, steps, itemsize=element_bytes) * ig_row_bytes(config, n_tokens, element_bytes)
    # a chunk's outputs and their differences from the corrupt run, and one layer's wider projections
    patched = CHUNK * (2 * outputs + WIDE_KEPT * n_tokens * config.n_heads * wide_projection_width(config) *
                       element_bytes)
    work = circuit_passes(config, n_tokens, steps, points=points, search=search)
    passes = sum(work["passes"].values())
    what = (f"the work of {passes:,.0f} forward passes of {n_tokens} tokens (two graph runs, EAP-IG with {steps} "
            f"steps, a {points}-point faithfulness curve" + (", the smallest-circuit search)" if search else ")"))
    return limits.Estimate(what, int(one.bytes + 2 * outputs + max(backward, patched)), one.seconds * passes)


def qk_estimate(config, n_tokens: int, *, element_bytes: int = 4, gflops: float):
    """One query–key breakdown: a graph run keeping every node's output and a plain forward."""
    from txviz import limits

    one = limits.trace_estimate(config, n_tokens, ("logits",), element_bytes=element_bytes, gflops=gflops)
    outputs = n_sources(config) * n_tokens * config.d_model * element_bytes
    passes = GRAPH_RUN_PASSES + wide_projection_passes(config, n_tokens) + 1
    return limits.Estimate(f"one graph run and one forward pass of {n_tokens} tokens", int(one.bytes + outputs),
                           one.seconds * passes)
