"""How far the zoo's losses can be trusted. The zoo trains each variant from one seed, so how much the
loss moves between seeds is not known. What can be measured is the evaluation noise: the standard error
of each loss over its held-out windows, and of a difference between two variants scored on the same
windows (paired). ``noise_finding`` words a comparison from those numbers, and ``loss_axis_range`` keeps
a chart from zooming a difference inside the noise into a finding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

@dataclass(frozen=True)
class LossEstimate:
    """A validation loss and its standard error over ``n_windows`` held-out windows."""

    name: str
    mean: float
    se: float
    n_windows: int


def loss_estimate(name: str, window_losses: torch.Tensor) -> LossEstimate:
    """Mean of the per-window losses (W,) and its standard error std/√W."""
    losses = window_losses.double()
    return LossEstimate(name, float(losses.mean()), float(losses.std() / math.sqrt(len(losses))), len(losses))


def paired_difference(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """(mean of a − b, its standard error) over the same windows: the noise left once both models
    meet the same text."""
    difference = a.double() - b.double()
    return float(difference.mean()), float(difference.std() / math.sqrt(len(difference)))


def noise_finding(estimates: list[LossEstimate], paired: dict[tuple[str, str], tuple[float, float]],
                  n_seeds: int = 1) -> str:
    """A comparison of the losses in words, from the numbers: is the largest gap inside each loss's
    evaluation noise (2 standard errors), inside the paired noise, and what one seed leaves unknown."""
    ordered = sorted(estimates, key=lambda e: e.mean)
    low, high = ordered[0], ordered[-1]
    gap, se = high.mean - low.mean, max(e.se for e in estimates)
    names = ", ".join(e.name for e in estimates)
    text = (f"The losses of {names} lie within **{gap:.4f} nats** of each other ({gap / high.mean:.2%} of the "
            f"loss). Each is known to ±{se:.4f} nats (one standard error over {low.n_windows} held-out windows), "
            + (f"so the differences are **within evaluation noise** ({gap / se:.1f} standard errors). "
               if gap < 2 * se else f"so the gap is {gap / se:.1f} standard errors: larger than evaluation noise. "))
    diff, paired_se = paired.get((high.name, low.name), (None, None))
    if diff is not None:
        text += (f"Scored on the same windows, {high.name} − {low.name} = {diff:+.4f} ± {paired_se:.4f} nats "
                 + ("(inside the paired noise too). " if abs(diff) < 2 * paired_se else
                    f"({abs(diff) / paired_se:.0f} paired standard errors: these weights do differ on this text). "))
    if n_seeds <= 1:
        text += ("Each variant was trained from **one seed**, so the spread between training runs is not measured "
                 "here; " + ("a gap this size is no evidence that the choice itself changes quality." if gap < 2 * se
                             else "how much of this gap another seed would move is not known."))
    return text


def loss_axis_range(estimates: list[LossEstimate], min_span_fraction: float = 0.05) -> tuple[float, float]:
    """A y-range holding every loss ± 2 standard errors and spanning at least ``min_span_fraction`` of
    the largest loss, so a difference of 0.1 % of the loss looks like 0.1 %, not like the whole axis."""
    low = min(e.mean - 2 * e.se for e in estimates)
    high = max(e.mean + 2 * e.se for e in estimates)
    span = max(high - low, min_span_fraction * max(e.mean for e in estimates))
    middle = (low + high) / 2
    return middle - span / 2, middle + span / 2
