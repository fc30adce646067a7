"""Attention for one head, step by step on the real tensors (seed §1.3, §5.1):

    S = Q Kᵀ  →  S / √d_k  →  + causal mask (−∞ above the diagonal)  →  softmax  →  · V

Recomputed from the captured q (after RoPE), k (after RoPE) and v of a layer; the result equals the
captured probabilities (the page shows the difference). Also the softmax without the 1/√d_k factor,
to show the saturation the scaling prevents.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AttentionSteps:
    q: torch.Tensor  # (T, D) queries of the head, after RoPE
    k: torch.Tensor  # (S, D) keys of its KV group, after RoPE
    v: torch.Tensor  # (S, D)
    raw: torch.Tensor  # (T, S) Q Kᵀ
    scaled: torch.Tensor  # (T, S) Q Kᵀ / √d_k
    masked: torch.Tensor  # (T, S) with −∞ where j > i
    probs: torch.Tensor  # (T, S) softmax of masked
    unscaled_probs: torch.Tensor  # (T, S) softmax(Q Kᵀ + mask): what happens without the scaling
    output: torch.Tensor  # (T, D) probs · V
    scale: float


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Row entropies in nats."""
    plogp = torch.where(probs > 0, probs * probs.clamp_min(1e-30).log(), torch.zeros_like(probs))
    return -plogp.sum(-1)


def attention_steps(q_rot: torch.Tensor, k_rot: torch.Tensor, v: torch.Tensor, head: int, *,
                    n_groups: int, mask: torch.Tensor | None = None) -> AttentionSteps:
    """q_rot (H, T, D), k_rot and v (Hkv, S, D) of one layer and sequence → every step for ``head``.

    ``mask`` is the additive (T, S) mask; the default is the causal mask for S == T.
    """
    kv_head = head // n_groups  # the KV head this query head shares (GQA/MQA)
    q, k, val = q_rot[head].float(), k_rot[kv_head].float(), v[kv_head].float()
    t, s = q.shape[0], k.shape[0]
    scale = q.shape[-1] ** -0.5
    if mask is None:
        future = torch.ones(t, s, dtype=torch.bool).triu(1 + s - t)
        mask = torch.zeros(t, s).masked_fill(future, float("-inf"))
    raw = q @ k.T  # (T, S)
    scaled = raw * scale
    masked = scaled + mask
    probs = torch.softmax(masked, dim=-1)
    unscaled = torch.softmax(raw + mask, dim=-1)
    return AttentionSteps(q, k, val, raw, scaled, masked, probs, unscaled, probs @ val, scale)
