"""Attention with a learned sink per head: one more logit in every softmax's denominator, and no value.

    [p_i1 … p_iS, σ_i] = softmax([s_i1 … s_iS, b_h]),   out_i = Σ_j p_ij v_j

gpt-oss (OpenAI 2025) learns one logit b_h per head (``sinks``); the weights over the real keys then sum
to 1 − σ_i, so a head can attend to nothing (Xiao et al. 2023 found models spending a first token on
that; Miller 2023's "softmax off by one" is the same idea with b = 0). The maps txviz shows are the p_ij
over real tokens, as transformers returns them, and ``attn_sink`` records σ_i: each map row sums to
1 − σ_i. Every path keeps the sink: the eager and blockwise paths concatenate it as one more column,
exactly as transformers' eager path does (the row maximum subtracted first); the fused kernel gets it as
one more key whose vector and value are zero and whose additive mask is b_h, so q·0 + b_h = b_h.
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


class SinkAttention(Attention):
    """Causal self-attention whose every head has a learned sink logit (``layers.{i}.attn.sinks``, (H,))."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self.sinks = nn.Parameter(torch.zeros(config.n_heads))

    def weights(self, scores: torch.Tensor, record: LayerRecorderProtocol) -> torch.Tensor:
        probs, share = softmax_with_sink(scores.float(), self.sinks)
        record("attn_sink", share)  # (B, H, T)
        return probs

    def block_weights(self, scores: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return out.copy_(softmax_with_sink(scores.float(), self.sinks)[0])

    def summary_scores(self, scores: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """ln p: the summaries' entropy, lse − Σ p·s, assumes rows summing to 1; with s = ln p its lse is
        0 and it is −Σ p ln p over the real keys, as on the map (0·ln 0 kept finite by the clamp)."""
        return probs.log().clamp(min=torch.finfo(probs.dtype).min)

    def _fused(self, q, k, v, ctx: AttentionContext, record: LayerRecorderProtocol) -> torch.Tensor:
        """The fused kernel over the keys plus one zero key and value whose mask is the sink logit."""
        b, h_kv, _, d = k.shape
        t = q.shape[2]
        zero = k.new_zeros(b, h_kv, 1, d)
        mask = ctx.causal_mask(q.dtype)[None].expand(1, self.n_heads, t, -1)  # (1, H, T, S): causal, window, bias
        sink = self.sinks.to(q.dtype).reshape(1, -1, 1, 1).expand(1, -1, t, 1)  # (1, H, T, 1)
        return F.scaled_dot_product_attention(q, torch.cat([k, zero], dim=2), torch.cat([v, zero], dim=2),
                                              attn_mask=torch.cat([mask, sink], dim=-1), scale=self.scale,
                                              enable_gqa=self.n_groups > 1)
