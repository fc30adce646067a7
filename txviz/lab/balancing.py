"""The Switch/GShard load-balancing loss for Mixture-of-Experts routers, and expert load.

Without an extra loss a router tends to collapse: the experts it already favours get the gradient,
get better, and are favoured more ("the gate tends to collapse onto favoring a few
experts"). Switch Transformer (Fedus et al. 2021, eq. 4–6; after GShard, Lepikhin et al. 2020) adds

    aux = E · Σ_e f_e · P_e

with E experts, f_e the fraction of routing assignments that went to expert e (top-1: of tokens;
top-k: the k choices of every token counted, normalized to sum to 1) and P_e the mean router
probability of e over the tokens. f is piecewise constant, so the gradient flows through P; the
loss is 1 for perfectly uniform routing and E·P_e when every token goes to expert e.

The formulas live in txviz.analysis.moe.routing (the app measures trained routers with them too); the lab
trains with them from here.
"""

from __future__ import annotations

from txviz.analysis.moe.routing import effective_experts, expert_load, load_balancing_loss

__all__ = ["effective_experts", "expert_load", "load_balancing_loss"]
