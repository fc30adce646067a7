"""Attribution patching (Nanda 2023, "Attribution Patching: Activation Patching At Industrial Scale";
Syed et al. 2023): the first-order estimate of every head's patching effect from one forward and one
backward pass on the clean prompt,

    effect(head) ≈ Σ_positions (a_corrupt − a_clean) · ∂metric/∂a |clean

where a is the head's output before o_proj and the metric the logit difference. It is linear in the
activation, so it misjudges heads whose effect saturates (attention patterns, LayerNorm scale);
``agreement`` says how far it matches exact patching (txviz.causal.patching) on the heads checked.
"""

from __future__ import annotations

import math

import torch

from txviz.causal.activations import Activations, GradientProbe, run_with_activations
from txviz.causal.metric import logit_diff
from txviz.causal.patching import as_batch, check_same_length


def attribution_patching(model, clean_ids, corrupt_ids, answer_id: int, wrong_id: int,
                         point: str = "head_out", *, source: Activations | None = None) -> torch.Tensor:
    """(L, H): the estimated change of the clean logit difference when each head's ``point`` is
    patched from the corrupt run. Two forward calls (corrupt: no grad) and one backward; the corrupt
    one is skipped when the caller gives its activations at ``point`` (``source``)."""
    check_same_length(clean_ids, corrupt_ids)
    corrupt = source if source is not None else \
        run_with_activations(model, as_batch(corrupt_ids), (point,), last_only=True)[1]
    probe = GradientProbe((point,))
    with torch.enable_grad():
        metric = logit_diff(model(as_batch(clean_ids), record=probe, last_only=True), answer_id, wrong_id)
        layers = range(model.config.n_layers)
        grads = torch.autograd.grad(metric.sum(), [probe.probes[i, point] for i in layers])
    rows = [((corrupt[i, point] - probe.activations[i, point]) * grad).sum(dim=(0, 2, 3))  # (H,)
            for i, grad in zip(layers, grads)]
    return torch.stack(rows).float().cpu()


def _ranks(x: torch.Tensor) -> torch.Tensor:
    ranks = torch.empty_like(x, dtype=torch.float64)
    ranks[x.argsort()] = torch.arange(len(x), dtype=torch.float64)
    return ranks


def _pearson(a: torch.Tensor, b: torch.Tensor) -> float | None:
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    denominator = float(a.norm() * b.norm())
    return None if denominator == 0 else float((a * b).sum()) / denominator


def agreement(estimate: torch.Tensor, exact: torch.Tensor, k: int = 10) -> dict:
    """How far two (L, H) rankings of heads agree: Pearson and Spearman correlation over every head
    given, and the share of the top k by |effect| that both pick. None where a grid is constant."""
    a, b = estimate.flatten(), exact.flatten()
    k = min(k, len(a))
    top_a = set(a.abs().topk(k).indices.tolist())
    top_b = set(b.abs().topk(k).indices.tolist())
    return {"pearson": _pearson(a, b), "spearman": _pearson(_ranks(a), _ranks(b)), "k": k,
            "top_k_overlap": len(top_a & top_b) / k if k else None}


def correlation_text(value: float | None, digits: int = 2) -> str:
    """A correlation as text with as many decimals as it takes (from ``digits``) not to read as a value it
    does not have: 0.996 is "+0.996", never "+1.00", and 0.004 never "+0.00". "undefined" for None."""
    if value is None:
        return "undefined"
    if min(abs(value), abs(abs(value) - 1)) < 1e-12:  # float noise of an exact 0 or ±1 (identical ranks)
        return f"{round(value):+.{digits}f}"
    for places in range(digits, 7):
        text = f"{value:+.{places}f}"
        if float(text) == value or abs(float(text)) not in (0.0, 1.0):
            return text
    if abs(value) < 0.5:  # closer to 0 than a millionth: in powers of ten
        return f"{value:+.2g}"
    return f"{math.copysign(math.floor(abs(value) * 1e6) / 1e6, value):+.6f}"  # within a millionth of ±1: cut down
