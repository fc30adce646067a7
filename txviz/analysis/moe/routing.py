"""Mixture of Experts, measured: where a router sends tokens, how evenly, and what the
experts cost.

A MoE layer scores every expert with a linear router, keeps the top k and mixes their outputs:

    y = Σ_{e ∈ TopK(g(x))} g_e(x) · FFN_e(x),      g(x) = softmax(x W_router)

Routing, from a trace that captured ``ROUTER_CAPTURES`` (txviz.capture.trace), per layer:

* load f_e: the share of the routing assignments expert e received (top-k: all k choices counted);
* effective experts exp(H(f)): E when the load is even, 1 when one expert takes everything;
* coefficient of variation std(f)/mean(f): 0 when even, √(E−1) when one expert takes everything;
* router entropy H(g(x)) per token: how sure the router is (log E at most);
* the Switch/GShard auxiliary loss E · Σ_e f_e · P_e (Fedus et al. 2021 eq. 4–6, after Lepikhin et al.
  2020), P_e the mean router probability: 1 for perfectly uniform routing, E·P_e when every token goes
  to expert e. transformers' Mixtral ``load_balancing_loss_func`` pools all layers and counts each of
  the k choices as a whole token, so it equals top_k × this loss on the pooled layers (tested).

Cost, for any config (dense or MoE): parameters kept in memory (all experts) against parameters and
FLOPs one token runs through (router + top-k experts), counted by ``txviz.model.counts``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.model.counts import count_active_params, count_params, flops_per_token, total_ffn_flops_per_token

ROUTER_CAPTURES = ("router_logits", "router_probs", "expert_ids", "expert_gates")
SHARED_GATE = "shared_expert_gate"  # the sigmoid gate of a shared expert (Qwen-MoE), where there is one


def router_captures(config: ModelConfig) -> tuple[str, ...]:
    """What a trace must capture for ``routing``: the router's outputs, and a shared expert's gate."""
    return ROUTER_CAPTURES + ((SHARED_GATE,) if config.is_moe and config.shared_expert_gate else ())


# ---- routing formulas -----------------------------------------------------------------------------
def expert_load(expert_ids: torch.Tensor, n_experts: int) -> torch.Tensor:
    """f: (E,) fraction of the routing assignments in ``expert_ids`` (..., K) that each expert got."""
    counts = torch.bincount(expert_ids.reshape(-1), minlength=n_experts).float()
    return counts / counts.sum()


def load_balancing_loss(router_logits: torch.Tensor, expert_ids: torch.Tensor) -> torch.Tensor:
    """E · Σ_e f_e · P_e for one layer: router_logits (..., E), expert_ids (..., K) of the same tokens.
    f is piecewise constant, so the gradient (training) flows through P."""
    n_experts = router_logits.shape[-1]
    probs = F.softmax(router_logits.reshape(-1, n_experts), dim=-1, dtype=torch.float32)  # (N, E)
    mean_prob = probs.mean(dim=0)  # P: (E,)
    fraction = expert_load(expert_ids, n_experts)  # f: (E,), no gradient
    return n_experts * (fraction * mean_prob).sum()


def effective_experts(load: torch.Tensor) -> float:
    """exp(entropy of the load): E when every expert gets the same share, 1 when one gets everything."""
    p = load[load > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def load_cv(load: torch.Tensor) -> torch.Tensor:
    """Coefficient of variation std(f)/mean(f) over the last dimension (population std)."""
    load = load.float()
    return load.std(dim=-1, unbiased=False) / load.mean(dim=-1)


def router_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each router distribution (..., E) → (...); 0·log 0 counts as 0."""
    probs = probs.float()
    return -torch.where(probs > 0, probs * probs.log(), torch.zeros_like(probs)).sum(dim=-1)


def ranked_probs(probs: torch.Tensor) -> torch.Tensor:
    """(E,) mean router probability of the best, second best, … expert over the tokens (N, E): how
    peaked the router is, whichever expert it picks."""
    return probs.float().sort(dim=-1, descending=True).values.reshape(-1, probs.shape[-1]).mean(dim=0)


@dataclass(frozen=True)
class Routing:
    """Routing of N tokens through the captured MoE layers. Tensors are (L, N, ·), layers in ``layers``
    order; the statistics are per layer."""

    layers: tuple[int, ...]
    logits: torch.Tensor  # (L, N, E)
    probs: torch.Tensor  # (L, N, E) softmax over every expert
    expert_ids: torch.Tensor  # (L, N, K) chosen experts, best first
    gates: torch.Tensor  # (L, N, K) their mixing weights (renormalized for router_norm="topk")
    shared_gates: torch.Tensor | None = None  # (L, N) a gated shared expert's σ(x·w), on every token

    @property
    def n_experts(self) -> int:
        return self.probs.shape[-1]

    @property
    def top_k(self) -> int:
        return self.expert_ids.shape[-1]

    @property
    def n_tokens(self) -> int:
        return self.probs.shape[1]

    @property
    def load(self) -> torch.Tensor:
        """(L, E) share of assignments per expert."""
        return torch.stack([expert_load(ids, self.n_experts) for ids in self.expert_ids])

    @property
    def effective_experts(self) -> torch.Tensor:
        return torch.tensor([effective_experts(load) for load in self.load])

    @property
    def cv(self) -> torch.Tensor:
        return load_cv(self.load)

    @property
    def aux_loss(self) -> torch.Tensor:
        return torch.stack([load_balancing_loss(l, e) for l, e in zip(self.logits, self.expert_ids)])

    @property
    def entropy(self) -> torch.Tensor:
        """(L, N) router entropy per token, nats."""
        return router_entropy(self.probs)

    @property
    def ranked_probs(self) -> torch.Tensor:
        """(L, E) mean probability of the best, second best, … expert."""
        return torch.stack([ranked_probs(p) for p in self.probs])

    def summary(self) -> list[dict]:
        """One row per layer: the statistics above as plain numbers."""
        rows = []
        for i, layer in enumerate(self.layers):
            rows.append({"layer": layer, "effective_experts": float(self.effective_experts[i]),
                         "cv": float(self.cv[i]), "aux_loss": float(self.aux_loss[i]),
                         "router_entropy": float(self.entropy[i].mean()),
                         "busiest_share": float(self.load[i].max()),
                         "load": [round(float(v), 4) for v in self.load[i]]})
        return rows


def routing(tr, batch: int | None = None) -> Routing:
    """The Routing of a Trace that captured ``router_captures(config)`` (on the MoE layers: a dense layer
    has no router): one sequence (``batch``), or every sequence of the batch pooled (None)."""
    def tokens(name: str, per_token: bool = False) -> torch.Tensor:
        tensor = tr[name]  # (L, B, T, ·), or (L, B, T) for one number per token
        tensor = tensor[:, batch:batch + 1] if batch is not None else tensor
        return tensor.reshape(tensor.shape[0], -1, *([] if per_token else [tensor.shape[-1]]))  # (L, N, ·)

    shared = tokens(SHARED_GATE, per_token=True).float() if SHARED_GATE in tr else None  # (L, N)
    return Routing(tuple(tr.layers), tokens("router_logits").float(), tokens("router_probs").float(),
                   tokens("expert_ids"), tokens("expert_gates").float(), shared)


def measure_routing(model, ids: torch.Tensor, layers=None) -> Routing:
    """Run ``model`` on ``ids`` (B, T) and pool the routing of every token."""
    from txviz.capture.trace import trace

    config = model.config
    if not config.moe_layers:
        raise ValueError(f"{config.name} has a dense FFN: there is no router to measure")
    layers = config.moe_layers if layers is None else layers
    return routing(trace(model, ids, capture=router_captures(config), layers=layers))


def balance_finding(top_k: int, n_experts: int, without: list[float], with_loss: list[float],
                    barely: float = 0.05) -> str:
    """The balanced-vs-unbalanced comparison in words, from the effective experts per layer of the
    two routers: "collapses" when the mean without the loss falls short of the mean with it by more
    than ``barely`` × E, "barely" otherwise; the worst layer is named either way."""
    mean_without, mean_with = sum(without) / len(without), sum(with_loss) / len(with_loss)
    gap = mean_with - mean_without
    worst = min(range(len(without)), key=lambda i: without[i])
    numbers = (f"{mean_without:.2f} effective experts of {n_experts} without the balancing loss against "
               f"{mean_with:.2f} with it")
    if gap > barely * n_experts:
        return (f"Top-{top_k} routing **collapses**: {numbers}; in layer {worst} only "
                f"{without[worst]:.2f} experts are effectively used.")
    if gap < -barely * n_experts:
        return f"Top-{top_k} routing is **more even without** the balancing loss: {numbers}."
    return (f"Top-{top_k} routing **barely collapses**: {numbers}, a difference of {abs(gap):.2f} "
            f"({abs(gap) / n_experts:.0%} of {n_experts}); even its most uneven layer ({worst}) uses "
            f"{without[worst]:.2f}. The balancing loss has little left to fix here.")


# ---- what a token costs ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Capacity:
    """What a model keeps in memory against what one token runs through."""

    name: str
    total_params: int  # every expert
    active_params: int  # router + top-k experts
    flops_per_token: int  # at ``context`` keys
    ffn_flops_per_token: int  # all layers
    context: int

    @property
    def active_share(self) -> float:
        return self.active_params / self.total_params

    @property
    def params_per_flop(self) -> float:
        """Capacity bought per unit of compute: ≈ 0.5 for a dense model at short context, more for MoE."""
        return self.total_params / self.flops_per_token


def capacity(config: ModelConfig, context: int = 0) -> Capacity:
    return Capacity(config.name, count_params(config), count_active_params(config), flops_per_token(config, context),
                    total_ffn_flops_per_token(config), context)
