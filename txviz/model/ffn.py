"""Position-wise feed-forward networks and the Mixture-of-Experts FFN.

SwiGLU: W_down(SiLU(x W_gate) ⊙ x W_up) (Shazeer 2020); GeGLU, the same gate with GELU (Shazeer 2020;
Gemma, with GELU's tanh form). GELU MLP: W_down(GELU(x W_up)) (GPT-2).
MoE: a linear router scores every expert, the top-k are run and mixed by their gate weights
(Shazeer et al. 2017; Mixtral, Jiang et al. 2024):  y = Σ_{e ∈ TopK(g(x))} g_e(x) · FFN_e(x); how the
router turns scores into choices and gates is txviz.model.router's. A shared expert runs for every
token beside the routed ones, outside the top-k, its output optionally scaled by a sigmoid gate
σ(x·w) (Qwen-MoE; DeepSeekMoE, Dai et al. 2024):  y = Σ_{e ∈ TopK} g_e(x) · FFN_e(x) + σ(x·w) · FFN_s(x).
A MoE model may keep a dense FFN on some layers (``dense_layers``): make_ffn picks per layer.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.model.clamped_swiglu import ClampedSwiGLU
from txviz.model.recording import NULL_LAYER_RECORDER, LayerRecorderProtocol
from txviz.model.router import make_router


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


def make_expert(config: ModelConfig, hidden: int | None = None) -> nn.Module:
    """The config's FFN kind, ``hidden`` wide (None: ``ffn_hidden``)."""
    hidden = config.ffn_hidden if hidden is None else hidden
    if config.ffn == "swiglu":
        return SwiGLU(config.d_model, hidden, config.mlp_bias)
    if config.ffn == "geglu":
        return GeGLU(config.d_model, hidden, config.mlp_bias, config.gelu_approximate)
    if config.ffn == "swiglu_clamped":
        return ClampedSwiGLU(config.d_model, hidden, config.mlp_bias, config.swiglu_alpha, config.swiglu_limit)
    return GeluMLP(config.d_model, hidden, config.mlp_bias, config.gelu_approximate)


class MoE(nn.Module):
    """Top-k routed experts, each ``expert_width`` wide; the router (txviz.model.router) picks them and
    their gates: ``router_norm='topk'`` renormalizes the chosen gates to sum to 1 (Mixtral); ``'all'``
    keeps the softmax over all experts (Switch, Qwen-MoE)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.top_k = config.top_k
        self.router = make_router(config)
        self.experts = nn.ModuleList(make_expert(config, config.expert_width) for _ in range(config.n_experts))

    def forward(self, x: torch.Tensor, record: LayerRecorderProtocol = NULL_LAYER_RECORDER) -> torch.Tensor:
        # legend: B batch, T tokens, d model width, E experts, K chosen per token
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # (B*T, d)
        logits, probs, chosen, gates = self.router.route(flat)  # (B*T, E), (B*T, E), (B*T, K), (B*T, K)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(chosen == e)
            if token_idx.numel():
                out.index_add_(0, token_idx, expert(flat[token_idx]) * gates[token_idx, slot, None])
        lead = shape[:-1]
        record.many(router_logits=logits.reshape(*lead, -1), router_probs=probs.reshape(*lead, -1),
                    expert_ids=chosen.reshape(*lead, -1), expert_gates=gates.reshape(*lead, -1))
        return self.add_shared(flat, out, record, lead).reshape(shape)

    def add_shared(self, flat: torch.Tensor, routed: torch.Tensor, record: LayerRecorderProtocol,
                   lead: torch.Size) -> torch.Tensor:
        """``routed`` (B*T, d) plus a shared expert's output on ``flat``: none here."""
        return routed


class SharedExpertMoE(MoE):
    """Routed experts plus one expert every token runs through, ``shared_expert_hidden`` wide."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.shared_expert = make_expert(config, config.shared_expert_hidden)

    def add_shared(self, flat: torch.Tensor, routed: torch.Tensor, record: LayerRecorderProtocol,
                   lead: torch.Size) -> torch.Tensor:
        return routed + self.shared_expert(flat)


class GatedSharedExpertMoE(SharedExpertMoE):
    """The shared expert's output scaled per token by σ(x·w) (Qwen-MoE's ``shared_expert_gate``)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.shared_expert_gate = nn.Linear(config.d_model, 1, bias=False)

    def add_shared(self, flat: torch.Tensor, routed: torch.Tensor, record: LayerRecorderProtocol,
                   lead: torch.Size) -> torch.Tensor:
        gate = torch.sigmoid(self.shared_expert_gate(flat))  # (B*T, 1)
        record("shared_expert_gate", gate.reshape(lead))  # (B, T)
        return routed + gate * self.shared_expert(flat)


def make_ffn(config: ModelConfig, layer: int = 0) -> nn.Module:
    """Layer ``layer``'s FFN: routed experts (with a shared one if the config has it) or a dense FFN."""
    if not config.is_moe_layer(layer):
        return make_expert(config)
    if not config.shared_expert_hidden:
        return MoE(config)
    return GatedSharedExpertMoE(config) if config.shared_expert_gate else SharedExpertMoE(config)
