"""gpt-oss's expert FFN: a SwiGLU with both inputs clamped, a sharper sigmoid and a shifted up branch.

    g = min(x W_gate + b_gate, L),   u = clamp(x W_up + b_up, −L, L),   y = W_down((u + 1) · g·σ(α·g)) + b_down

with α = ``swiglu_alpha`` (1.702: g·σ(1.702·g) is the sigmoid approximation of GELU, Hendrycks & Gimpel
2016) and L = ``swiglu_limit`` (7), which bounds what one expert can add to the residual (OpenAI 2025).
"""

from __future__ import annotations

import torch
from torch import nn


class ClampedSwiGLU(nn.Module):
    """The same three projections as txviz.model.ffn.SwiGLU (gate_proj, up_proj, down_proj)."""

    def __init__(self, d_model: int, hidden: int, bias: bool, alpha: float, limit: float):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, hidden, bias=bias)
        self.up_proj = nn.Linear(d_model, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, d_model, bias=bias)
        self.alpha, self.limit = alpha, limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.gate_proj(x).clamp(max=self.limit)
        up = self.up_proj(x).clamp(min=-self.limit, max=self.limit)
        return self.down_proj((up + 1) * (gate * torch.sigmoid(gate * self.alpha)))
