"""The Switch/GShard load-balancing loss for Mixture-of-Experts routers (seed §4.2), and expert load.

Without an extra loss a router tends to collapse: the experts it already favours get the gradient,
get better, and are favoured more (seed §4.2, "the gate tends to collapse onto favoring a few
experts"). Switch Transformer (Fedus et al. 2021, eq. 4–6; after GShard, Lepikhin et al. 2020) adds

    aux = E · Σ_e f_e · P_e

with E experts, f_e the fraction of routing assignments that went to expert e (top-1: of tokens;
top-k: the k choices of every token counted, normalized to sum to 1) and P_e the mean router
probability of e over the tokens. f is piecewise constant, so the gradient flows through P; the
loss is 1 for perfectly uniform routing and E·P_e when every token goes to expert e.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F


def expert_load(expert_ids: torch.Tensor, n_experts: int) -> torch.Tensor:
    """f: (E,) fraction of the routing assignments in ``expert_ids`` (..., K) that each expert got."""
    counts = torch.bincount(expert_ids.reshape(-1), minlength=n_experts).float()
    return counts / counts.sum()


def load_balancing_loss(router_logits: torch.Tensor, expert_ids: torch.Tensor) -> torch.Tensor:
    """E · Σ_e f_e · P_e for one layer: router_logits (..., E), expert_ids (..., K) of the same tokens."""
    n_experts = router_logits.shape[-1]
    probs = F.softmax(router_logits.reshape(-1, n_experts), dim=-1, dtype=torch.float32)  # (N, E)
    mean_prob = probs.mean(dim=0)  # P: (E,)
    fraction = expert_load(expert_ids, n_experts)  # f: (E,), no gradient
    return n_experts * (fraction * mean_prob).sum()


def effective_experts(load: torch.Tensor) -> float:
    """exp(entropy of the load): E when every expert gets the same share, 1 when one gets everything."""
    p = load[load > 0]
    return float(torch.exp(-(p * p.log()).sum()))
