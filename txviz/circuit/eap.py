"""Edge attribution patching: every edge's patching effect estimated from gradients, in one pass.

EAP (Nanda 2023; Syed et al. 2023): patching edge u → v changes v's input by (corrupt_u − clean_u), so
to first order the metric changes by

    score(u → v) = (corrupt_u − clean_u) · ∂metric/∂input_v |clean

summed over positions and width: one forward and one backward of the clean run give ∂metric/∂input_v
for every target at once (txviz.circuit.runner keeps each target's input tensor), and the clean and
corrupt runs' outputs (txviz.circuit.pair) give every difference. It is exactly the derivative of the
metric in the edge's patch fraction ε at ε = 0, which the tests check against finite differences.

EAP-IG (Hanna et al. 2024, "Have Faith in Faithfulness"): the gradient averaged over the runs whose
input embeddings lie at α = 1/k, 2/k, …, 1 of the way from the corrupt prompt's to the clean one's,

    score(u → v) = (corrupt_u − clean_u) · (1/k) Σ_α ∂metric/∂input_v |α

Here an interpolated run is the clean run with every edge out of the embeddings patched by 1 − α, which
is the same run: the k runs go side by side in one batched forward and one backward. With k = 1 it is
EAP. Summed over the embeddings' out-edges the scores approach, as k grows, the effect of patching all
of those edges (the corrupt run minus the clean one): the completeness of integrated gradients (Sundararajan
et al. 2017), which the tests measure.

Scores are (targets, sources) tensors, 0 where there is no edge; a positive score says patching that
edge raises the metric.
"""

from __future__ import annotations

from typing import Callable

import torch

from txviz.circuit.graph import qk_norm_across_heads
from txviz.circuit.pair import CircuitPair
from txviz.circuit.runner import run_graph


def _scores(pair: CircuitPair, inputs, grads) -> torch.Tensor:
    """(targets, sources): Σ_{t,d} (corrupt_u − clean_u)·∂metric/∂input_v, gradients summed over the batch."""
    graph, change = pair.graph, pair.output_change  # (N, T, d)
    scores = torch.zeros(graph.valid.shape, dtype=torch.float32)
    for (rows, tensor), grad in zip(inputs, grads):
        grad = grad.sum(0)  # (R, T, d) or (T, d)
        grad = grad if grad.dim() == 3 else grad[None]
        first = max(grad.shape[1] - change.shape[1] + pair.same_until, 0)  # earlier outputs do not change
        n = graph.targets[rows.start].n_sources
        diffs = change[:n, change.shape[1] - grad.shape[1] + first:]  # the logits read the last position only
        scores[rows, :n] = torch.einsum("rtd,ntd->rn", grad[:, first:].float(), diffs.float())
    return scores


def _gradient_scores(pair: CircuitPair, patch: torch.Tensor | None) -> torch.Tensor:
    with torch.enable_grad():
        run = run_graph(pair.model, pair.graph, pair.clean_ids, patch=patch,
                        corrupt=None if patch is None else pair.corrupt.outputs, keep_inputs=True,
                        same_until=pair.same_until)
        tensors = [tensor for _, tensor in run.inputs]
        grads = torch.autograd.grad(pair.metric(run.logits).sum(), tensors)
    return _scores(pair, run.inputs, grads)


def eap(pair: CircuitPair) -> torch.Tensor:
    """(targets, sources) EAP scores: one forward and one backward of the clean run."""
    return _gradient_scores(pair, None)


def ig_patch(pair: CircuitPair, alphas: torch.Tensor) -> torch.Tensor:
    """(k, targets, sources): the embeddings' out-edges patched by 1 − α, one row per α."""
    patch = torch.zeros(len(alphas), *pair.graph.valid.shape)
    patch[:, :, 0] = 1 - alphas[:, None]
    return patch


# What one batch row of a backward pass holds, per token and per target input of every layer, in
# activations of the model's width: each head's q, k and v input is normed and projected on its own, and
# autograd keeps about six such tensors of each. Measured on SmolLM2 (55 tokens, float32): 0.55 GB a row.
SAVED_PER_INPUT = 6
# Where the QK-norm spans all heads, each head's wider q and k projections (wide_projection_width): autograd
# keeps the projection and its normed form; a row's peak memory grew by 2 to 2.5 times their size (an
# OLMo 2-shaped model, d 512, 8 heads, 8 layers, 55 tokens).
WIDE_KEPT = 3
ACTIVATION_BUDGET = 1.5 * 2 ** 30  # bytes of a batched backward: SmolLM2's 24-token trophy pair runs its 5 steps at once


def wide_projection_width(config) -> int:
    """Rows of the q and k projections a graph run computes per head and token beyond the head's own
    (2·D): where the QK-norm spans all heads, each head projects its query input through every head's
    rows and its key input through every KV head's, (H − 1)·D + (Hkv − 1)·D more; 0 elsewhere."""
    if not qk_norm_across_heads(config):
        return 0
    return (config.n_heads + config.n_kv_heads - 2) * config.head_dim


def ig_row_bytes(config, n_tokens: int, itemsize: int = 4) -> int:
    """What one batch row of the backward holds: SAVED_PER_INPUT model-wide tensors per target input,
    and WIDE_KEPT of each head's wider projections where the QK-norm spans all heads."""
    inputs = config.n_layers * (3 * config.n_heads + 1)
    wide = config.n_layers * config.n_heads * wide_projection_width(config) * WIDE_KEPT
    return n_tokens * itemsize * (inputs * config.d_model * SAVED_PER_INPUT + wide)


def ig_rows(config, n_tokens: int, steps: int, budget: float = ACTIVATION_BUDGET, itemsize: int = 4) -> int:
    """How many interpolation steps share one forward and backward: as many as fit ``budget`` (batching
    is faster: SmolLM2's 5 steps on 55 tokens took 7.8 CPU s at once, 13.4 one by one, but 3.7 GB)."""
    return max(1, min(steps, int(budget // ig_row_bytes(config, n_tokens, itemsize))))


def eap_ig(pair: CircuitPair, steps: int = 5, *, batch: int | None = None,
           on_batch: Callable[[], None] | None = None) -> torch.Tensor:
    """(targets, sources) EAP-IG scores over ``steps`` interpolation steps, ``batch`` of them per forward
    and backward (default: as many as ``ig_rows`` allows); ``on_batch()`` after each (a progress bar)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    alphas = torch.arange(1, steps + 1, dtype=torch.float32) / steps
    itemsize = pair.model.embed.weight.element_size()
    batch = batch or ig_rows(pair.model.config, pair.clean_ids.shape[1], steps, itemsize=itemsize)
    total = torch.zeros(pair.graph.valid.shape)
    for start in range(0, steps, batch):
        chunk = alphas[start:start + batch]
        patch = None if bool((chunk == 1).all()) else ig_patch(pair, chunk)
        scores = _gradient_scores(pair, patch)
        total += scores if patch is not None else scores * len(chunk)
        if on_batch is not None:
            on_batch()
    return total / steps
