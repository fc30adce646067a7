"""Attention with a learned sink per head: one more logit in every softmax's denominator, and no value.

    [p_i1 … p_iS, σ_i] = softmax([s_i1 … s_iS, b_h]),   out_i = Σ_j p_ij v_j

gpt-oss (OpenAI 2025) learns one logit b_h per head (``sinks``); the weights over the real keys then sum
to 1 − σ_i, so a head can attend to nothing (Xiao et al. 2023 found models spending a first token on
that; Miller 2023's "softmax off by one" is the same idea with b = 0). The maps txviz shows are the p_ij
over real tokens, as transformers returns them, and ``attn_sink`` records σ_i: each map row sums to
1 − σ_i. Every path keeps the sink: the eager and blockwise paths concatenate it as one more column,
exactly as transformers' eager path does (the row maximum subtracted first); the fused kernel gets it as
one more key, through one more coordinate of every query and key (see ``SinkAttention._fused``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.model.attention import Attention, AttentionContext
from txviz.model.recording import LayerRecorderProtocol


def softmax_with_sink(scores: torch.Tensor, sinks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights over the real keys (..., H, T, S), the sink's share (..., H, T)) of masked ``scores``
    (..., H, T, S) and the heads' sink logits (H,), in the scores' dtype."""
    sink = sinks.to(scores.dtype).reshape(-1, 1, 1).expand(*scores.shape[:-1], 1)  # (..., H, T, 1)
    combined = torch.cat([scores, sink], dim=-1)  # (..., H, T, S + 1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    probs = F.softmax(combined, dim=-1, dtype=combined.dtype)
    return probs[..., :-1], probs[..., -1]


def head_weights(attention: Attention, scores: torch.Tensor, head: int) -> torch.Tensor:
    """The weights over the last axis of ``head``'s masked scores (..., S) as the layer ``attention`` weighs
    them: with the head's sink where it has one; float32, or float64 for float64 scores."""
    wide = scores.to(torch.promote_types(scores.dtype, torch.float32))
    if not isinstance(attention, SinkAttention):
        return torch.softmax(wide, dim=-1)
    rows = wide.reshape(1, -1, wide.shape[-1])  # (1, R, S): one head's rows
    return softmax_with_sink(rows, attention.sinks[head:head + 1].to(wide.dtype))[0].reshape(wide.shape)


def head_sink(model, layer: int, head: int) -> float | None:
    """The learned sink logit of ``head`` in ``layer`` of ``model`` (a Decoder), or None without sinks."""
    attention = model.layers[layer].attn
    return float(attention.sinks[head].detach()) if isinstance(attention, SinkAttention) else None


class SinkAttention(Attention):
    """Causal self-attention whose every head has a learned sink logit (``layers.{i}.attn.sinks``, (H,))."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.sinks = nn.Parameter(torch.zeros(config.n_heads))

    def weights(self, scores: torch.Tensor, record: LayerRecorderProtocol) -> torch.Tensor:
        probs, share = softmax_with_sink(scores.to(torch.promote_types(scores.dtype, torch.float32)), self.sinks)
        record("attn_sink", share)  # (B, H, T)
        return probs

    def block_weights(self, scores: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return out.copy_(softmax_with_sink(scores.float(), self.sinks)[0])

    def summary_scores(self, scores: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """ln p: the summaries' entropy, lse − Σ p·s, assumes rows summing to 1; with s = ln p its lse is
        0 and it is −Σ p ln p over the real keys, as on the map (0·ln 0 kept finite by the clamp)."""
        return probs.log().clamp(min=torch.finfo(probs.dtype).min)

    def _fused(self, q, k, v, ctx: AttentionContext, record: LayerRecorderProtocol) -> torch.Tensor:
        """The fused kernel with the sink as key 0: every head dimension gets one more coordinate, the
        query's b_h/scale and the keys' 0, except the sink key's 1, so its score is b_h; its value is 0.
        No per-head mask is built: a plain causal call keeps ``is_causal`` by a dummy first query (dropped)
        that makes the key and query counts equal again, and any other mask gets one visible column."""
        # legend: B batch, H heads, Hkv KV heads, T queries, S keys, D head_dim
        b, h_kv, s, d = k.shape
        sink = (self.sinks / self.scale).to(q.dtype).reshape(1, -1, 1, 1).expand(b, -1, q.shape[2], 1)
        q = torch.cat([q, sink], dim=-1)  # (B, H, T, D + 1)
        sink_key = torch.cat([k.new_zeros(b, h_kv, 1, d), k.new_ones(b, h_kv, 1, 1)], dim=-1)
        k = torch.cat([sink_key, F.pad(k, (0, 1))], dim=2)  # (B, Hkv, 1 + S, D + 1)
        v = F.pad(v, (0, 1, 1, 0))  # (B, Hkv, 1 + S, D + 1): the sink's value and the padding are 0
        if ctx.is_causal:
            q = F.pad(q, (0, 0, 1, 0))  # (B, H, 1 + T, D + 1): the dummy query sees only the sink
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale,
                                                 enable_gqa=self.n_groups > 1)[:, :, 1:]
        else:
            mask = None if ctx.mask is None else F.pad(ctx.mask, (1, 0))  # (1|H, T, 1 + S): the sink visible
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale,
                                                 enable_gqa=self.n_groups > 1)
        return out[..., :d]  # (B, H, T, D)
