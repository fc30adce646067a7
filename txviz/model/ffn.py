"""Position-wise feed-forward networks and the Mixture-of-Experts FFN.

SwiGLU: W_down(SiLU(x W_gate) ⊙ x W_up) (Shazeer 2020); GeGLU, the same gate with GELU (Shazeer 2020;
Gemma, with GELU's tanh form). GELU MLP: W_down(GELU(x W_up)) (GPT-2).
MoE: a linear router scores every expert, the top-k are run and mixed by their gate weights
(Shazeer et al. 2017; Mixtral, Jiang et al. 2024):  y = Σ_{e ∈ TopK(g(x))} g_e(x) · FFN_e(x).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.model.recording import NULL_LAYER_RECORDER, LayerRecorderProtocol


class SwiGLU(nn.Module):
    """W_down(act(x W_gate) ⊙ x W_up) with act = SiLU; ``GeGLU`` swaps in GELU, nothing else."""

    def __init__(self, d_model: int, hidden: int, bias: bool):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, hidden, bias=bias)
        self.up_proj = nn.Linear(d_model, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, d_model, bias=bias)

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.activation(self.gate_proj(x)) * self.up_proj(x))


class GeGLU(SwiGLU):
    def __init__(self, d_model: int, hidden: int, bias: bool, approximate: str):
        super().__init__(d_model, hidden, bias)
        self.approximate = approximate

    def activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate=self.approximate)


class GeluMLP(nn.Module):
    def __init__(self, d_model: int, hidden: int, bias: bool, approximate: str):
        super().__init__()
        self.up_proj = nn.Linear(d_model, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, d_model, bias=bias)
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.up_proj(x), approximate=self.approximate))


def make_expert(config: ModelConfig) -> nn.Module:
    if config.ffn == "swiglu":
        return SwiGLU(config.d_model, config.ffn_hidden, config.mlp_bias)
    if config.ffn == "geglu":
        return GeGLU(config.d_model, config.ffn_hidden, config.mlp_bias, config.gelu_approximate)
    return GeluMLP(config.d_model, config.ffn_hidden, config.mlp_bias, config.gelu_approximate)


class MoE(nn.Module):
    """Top-k routed experts. ``router_norm='topk'`` renormalizes the chosen gates to sum to 1
    (Mixtral); ``'all'`` keeps the softmax over all experts (Switch, Qwen-MoE)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.top_k = config.top_k
        self.renormalize = config.router_norm == "topk"
        self.router = nn.Linear(config.d_model, config.n_experts, bias=False)
        self.experts = nn.ModuleList(make_expert(config) for _ in range(config.n_experts))

    def forward(self, x: torch.Tensor, record: LayerRecorderProtocol = NULL_LAYER_RECORDER) -> torch.Tensor:
        # legend: B batch, T tokens, d model width, E experts, K chosen per token
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # (B*T, d)
        logits = self.router(flat)  # (B*T, E)
        probs = F.softmax(logits, dim=-1, dtype=torch.float32)
        gates, chosen = torch.topk(probs, self.top_k, dim=-1)  # (B*T, K) each
        if self.renormalize:
            gates = gates / gates.sum(dim=-1, keepdim=True)
        gates = gates.to(x.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(chosen == e)
            if token_idx.numel():
                out.index_add_(0, token_idx, expert(flat[token_idx]) * gates[token_idx, slot, None])
        lead = shape[:-1]
        record.many(router_logits=logits.reshape(*lead, -1), router_probs=probs.reshape(*lead, -1),
                    expert_ids=chosen.reshape(*lead, -1), expert_gates=gates.reshape(*lead, -1))
        return out.reshape(shape)


def make_ffn(config: ModelConfig) -> nn.Module:
    return MoE(config) if config.is_moe else make_expert(config)
