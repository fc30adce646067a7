"""Attention for one head, step by step on the real tensors, in the order the layer runs them
(txviz.model.attention):

    S = Q Kᵀ  →  S · s  →  cap(S)  →  + M  →  softmax  →  · V

(with a learned sink per head, gpt-oss, the softmax has one more logit in its denominator: txviz.model.sinks)

s is the layer's own query scale (1/√d_k unless the config sets ``query_scale``, e.g. Gemma 2/3's
query_pre_attn_scalar^−½), cap is the attention soft-cap where the model has one (Gemma 2: c·tanh(x/c);
else no step), and M is the layer's own additive mask: causal, with the layer's sliding window and
ALiBi's bias folded in, taken from the model's ``layer_context`` rather than re-derived here.

Recomputed from the captured q (after RoPE), k (after RoPE) and v of a layer; the result equals the
captured probabilities (the page shows the difference). Also the softmax without the scale, to show the
saturation the scaling prevents.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from txviz.model.sinks import softmax_with_sink
from txviz.model.softcap import make_softcap


@dataclass(frozen=True)
class LayerAttention:
    """How one layer turns QKᵀ into weights: its scale, its soft-cap (None: none), its window and its
    heads' learned sink logits (gpt-oss: one more logit in each softmax's denominator; None: none)."""
    scale: float
    softcap: float | None
    window: int | None
    sinks: tuple[float, ...] | None = None


@dataclass(frozen=True)
class AttentionSteps:
    q: torch.Tensor  # (T, D) queries of the head, after RoPE
    k: torch.Tensor  # (S, D) keys of its KV group, after RoPE
    v: torch.Tensor  # (S, D)
    raw: torch.Tensor  # (T, S) Q Kᵀ
    scaled: torch.Tensor  # (T, S) Q Kᵀ · scale
    capped: torch.Tensor  # (T, S) the soft-capped scores; the scaled ones where the layer has no cap
    masked: torch.Tensor  # (T, S) with −∞ where key j is hidden from query i (future, or outside the window)
    probs: torch.Tensor  # (T, S) softmax of masked
    unscaled_probs: torch.Tensor  # (T, S) softmax(cap(Q Kᵀ) + M): what happens without the scaling
    output: torch.Tensor  # (T, D) probs · V
    scale: float
    softcap: float | None
    window: int | None


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Row entropies in nats."""
    plogp = torch.where(probs > 0, probs * probs.clamp_min(1e-30).log(), torch.zeros_like(probs))
    return -plogp.sum(-1)


def layer_attention(model, layer: int) -> LayerAttention:
    """The scale, soft-cap and window ``layer`` of ``model`` (a txviz Decoder) attends with."""
    config, attn = model.config, model.layers[layer].attn
    sinks = tuple(attn.sinks.detach().tolist()) if config.attn_sinks else None
    return LayerAttention(attn.scale, config.attn_softcap, config.layer_window(layer), sinks)


def layer_mask(model, layer: int, n_tokens: int, head: int) -> torch.Tensor:
    """(T, T) the additive mask ``head`` of ``layer`` sees on a prompt of ``n_tokens`` from position 0:
    the model's own AttentionContext for that layer (causal, its window, ALiBi's bias)."""
    device = model.embed.weight.device
    positions = torch.arange(n_tokens, device=device if device.type != "meta" else "cpu")
    mask = model.layer_context(layer, positions, positions, torch.float32).causal_mask(torch.float32)  # (1|H, T, T)
    return mask[head if mask.shape[0] > 1 else 0].cpu()


def attention_steps(q_rot: torch.Tensor, k_rot: torch.Tensor, v: torch.Tensor, head: int, *,
                    n_groups: int, mask: torch.Tensor | None = None,
                    layer: LayerAttention | None = None) -> AttentionSteps:
    """q_rot (H, T, D), k_rot and v (Hkv, S, D) of one layer and sequence → every step for ``head``.

    ``layer`` is how the layer attends (``layer_attention``); the default is the plain 1/√d_k with no
    cap and no window. ``mask`` is the additive (T, S) mask (``layer_mask``); the default, the plain
    causal mask, is refused for a windowed layer. ``layer_steps`` does all of it from the model.
    """
    kv_head = head // n_groups  # the KV head this query head shares (GQA/MQA)
    q, k, val = q_rot[head].float(), k_rot[kv_head].float(), v[kv_head].float()
    t, s = q.shape[0], k.shape[0]
    layer = layer or LayerAttention(q.shape[-1] ** -0.5, None, None)
    if mask is None:
        if layer.window is not None:
            raise ValueError(f"a layer with a window of {layer.window} needs its own mask (layer_mask)")
        future = torch.ones(t, s, dtype=torch.bool).triu(1 + s - t)
        mask = torch.zeros(t, s).masked_fill(future, float("-inf"))
    cap = make_softcap(layer.softcap)
    raw = q @ k.T  # (T, S)
    scaled = raw * layer.scale
    capped = cap(scaled)
    masked = capped + mask
    softmax = torch.softmax if layer.sinks is None else _with_sink(layer.sinks[head])
    probs = softmax(masked, dim=-1)
    unscaled = softmax(cap(raw) + mask, dim=-1)
    return AttentionSteps(q, k, val, raw, scaled, capped, masked, probs, unscaled, probs @ val,
                          layer.scale, layer.softcap, layer.window)


def _with_sink(sink: float):
    """softmax over the last axis of (T, S) scores with one more logit, ``sink``, in the denominator."""
    def softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
        return softmax_with_sink(scores[None], torch.tensor([sink], dtype=scores.dtype))[0][0]
    return softmax


def layer_steps(model, layer: int, head: int, q_rot: torch.Tensor, k_rot: torch.Tensor,
                v: torch.Tensor) -> AttentionSteps:
    """Every step for ``head`` of ``layer`` as ``model`` runs it (its scale, cap and mask), from the
    layer's captured q_rot (H, T, D), k_rot and v (Hkv, T, D) of a prompt that starts at position 0."""
    return attention_steps(q_rot, k_rot, v, head, n_groups=model.config.n_groups,
                           mask=layer_mask(model, layer, q_rot.shape[1], head), layer=layer_attention(model, layer))
