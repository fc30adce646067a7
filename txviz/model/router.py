"""The router of a Mixture-of-Experts FFN: which k experts each token runs through, and with what gates.

Every router scores the experts with one linear map, logits = x W_r (+ b_r), then picks k of them. The
families differ in the order of the two steps that follow, which the config names (``router_order``):

* ``softmax_topk``: g = softmax(logits) over all E experts, the k largest kept (Shazeer et al. 2017;
  Mixtral, Qwen-MoE, OLMoE). The chosen gates either stay as the softmax gives them (``router_norm``
  ``"all"``: Switch, Qwen's ``norm_topk_prob`` false, OLMoE) or are divided by their sum
  (``"topk"``: Mixtral, Qwen3-MoE).
* ``topk_softmax``: the k largest logits kept, then a softmax over those k only (Granite-MoE; gpt-oss
  with a router bias). Softmax is monotone and a softmax over the chosen is the chosen probabilities
  renormalised, so this picks the same experts with the same gates as ``softmax_topk`` with
  ``router_norm="topk"`` (the config refuses it with "all"), up to rounding; it is kept as its own
  order because it is how those references compute it, in float32 logits.

Whatever the order, a router reports one ``Routing``: the logits, the softmax over every expert (what
the router's distribution looks like, for entropy and gate histograms), the chosen experts best first,
and the gates they are mixed with. The router is an ``nn.Linear`` (its parameters are ``weight`` and,
with ``router_bias``, ``bias``), so calling it gives the logits; ``route`` gives the Routing.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from txviz.config import ModelConfig


class Routing(NamedTuple):
    """One router call on N tokens (any leading shape ``...`` in place of N)."""

    logits: torch.Tensor  # (..., E)
    probs: torch.Tensor  # (..., E) softmax over every expert, float32
    chosen: torch.Tensor  # (..., K) expert indices, best first
    gates: torch.Tensor  # (..., K) the weights the chosen experts' outputs are mixed with


class Router(nn.Linear):
    """logits = x W_r (+ b); ``route`` turns them into a Routing (softmax over all, then top-k)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config.d_model, config.n_experts, bias=config.router_bias)
        self.top_k = config.top_k
        self.renormalize = config.router_norm == "topk"

    def route(self, x: torch.Tensor) -> Routing:
        # legend: N tokens, d model width, E experts, K chosen per token
        logits = self(x)  # (N, E)
        probs = F.softmax(logits, dim=-1, dtype=torch.float32)  # (N, E)
        gates, chosen = torch.topk(probs, self.top_k, dim=-1)  # (N, K) each
        if self.renormalize:
            gates = gates / gates.sum(dim=-1, keepdim=True)
        return Routing(logits, probs, chosen, gates.to(x.dtype))


class TopKSoftmaxRouter(Router):
    """Top-k on the logits, then a softmax over the chosen k (Granite-MoE, gpt-oss): gates sum to 1."""

    def route(self, x: torch.Tensor) -> Routing:
        logits = self(x).float()  # (N, E)
        top_logits, chosen = torch.topk(logits, self.top_k, dim=-1)  # (N, K) each
        gates = F.softmax(top_logits, dim=-1)  # (N, K)
        return Routing(logits, F.softmax(logits, dim=-1), chosen, gates.to(x.dtype))


ROUTERS: dict[str, type[Router]] = {"softmax_topk": Router, "topk_softmax": TopKSoftmaxRouter}


def make_router(config: ModelConfig) -> Router:
    return ROUTERS[config.router_order](config)
