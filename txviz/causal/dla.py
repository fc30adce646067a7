"""Direct logit attribution: each head's and each FFN's share of the logit difference at the last position.

The final residual is a sum: embeddings (+ learned positions) + Σ_layers (Σ_heads head_h·W_O,hᵀ + o_proj
bias + FFN output). With the final norm's scale frozen at the clean run's (its only non-linearity:
RMSNorm divides by the clean rms; LayerNorm also subtracts each part's own mean, which is linear), the
logit difference (U[answer] − U[wrong])·norm(x) splits into one term per part, and the terms add up to
it exactly (Elhage et al. 2021, "A Mathematical Framework"; Wang et al. 2022, IOI; Nanda's
TransformerLens ``logit_attribution``). Computed in float64. The constant parts (o_proj biases,
LayerNorm's bias) are reported as ``bias``, zero for SmolLM2.

Gemma 2/3 normalize the attention output again before it joins the residual (``post_attn_norm``): that
norm is frozen the same way, at the scale of the layer's whole attention output, so each head's share
still adds up exactly (the FFN's recorded output is already post-normed). A final logit soft-cap
(Gemma 2) is not linear: the attribution is then of the logit difference *before* the cap, ``total``,
and ``capped_total`` is what the model outputs. Granite's multipliers are linear: each head's share is
scaled by ``residual_scale`` as its output is, and every part divided by ``logit_divisor`` as the logits are.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from txviz.causal.activations import run_with_activations
from txviz.causal.metric import logit_diff
from txviz.model.norm import LayerNorm, RMSNorm


@dataclass(frozen=True)
class LogitAttribution:
    total: float  # the model's logit difference
    embed: float  # token embeddings plus learned positions
    bias: float  # attention output biases and the final LayerNorm's bias
    heads: torch.Tensor  # (L, H)
    mlps: torch.Tensor  # (L,) the FFN (dense or MoE) of each layer
    capped_total: float | None = None  # the difference after a final soft-cap, when the model has one

    @property
    def parts_sum(self) -> float:
        return self.embed + self.bias + float(self.heads.sum()) + float(self.mlps.sum())


def frozen_norm(norm, final: torch.Tensor):
    """The final norm as a linear map of one part, its scale taken from the whole residual ``final`` (d,)."""
    weight = norm.weight.detach().double()
    if isinstance(norm, RMSNorm):
        rms = torch.sqrt(final.pow(2).mean() + norm.eps)
        return lambda part: part / rms * weight
    if isinstance(norm, LayerNorm):
        sigma = torch.sqrt(final.var(unbiased=False) + norm.eps)
        return lambda part: (part - part.mean(-1, keepdim=True)) / sigma * weight
    raise TypeError(f"no frozen form for {type(norm).__name__}")


def _post_attention(layer, parts: torch.Tensor, bias: torch.Tensor | None):
    """What happens to one part of a layer's attention output on its way into the residual: nothing, or
    Gemma's post-attention norm frozen at the scale of the whole output (Σ parts + bias)."""
    norm = layer.post_attn_norm
    if not isinstance(norm, (RMSNorm, LayerNorm)):
        return lambda part: part
    whole = parts.sum(0) + (0 if bias is None else bias.detach().double())
    return frozen_norm(norm, whole)


def _head_parts(attn, head_out: torch.Tensor) -> torch.Tensor:
    """head_out (H, D) at one position → (H, d): each head's write into the residual stream."""
    n_heads, head_dim = head_out.shape
    w_o = attn.o_proj.weight.detach().double().view(-1, n_heads, head_dim)  # (d, H, D)
    return torch.einsum("hd,mhd->hm", head_out.double(), w_o)


@torch.no_grad()
def direct_logit_attribution(model, ids: torch.Tensor, answer_id: int, wrong_id: int) -> LogitAttribution:
    """Split logit(answer) − logit(wrong) at the last position of ``ids`` (T,) into its parts."""
    ids = torch.as_tensor(ids)
    ids = ids[None] if ids.dim() == 1 else ids
    last_layer = model.config.n_layers - 1
    logits, acts = run_with_activations(model, ids, ("resid_pre", "head_out", "ffn_out", "resid_post"))
    final = acts[last_layer, "resid_post"][0, -1].double()  # (d,)
    linear = frozen_norm(model.final_norm, final)
    unembed = model.unembedding.detach()[[answer_id, wrong_id]].double()  # the two rows read, not all V
    divisor, scale = model.config.logit_divisor, model.config.residual_scale  # Granite's; 1 elsewhere
    direction = (unembed[0] - unembed[1]) / divisor  # (d,)

    def score(part: torch.Tensor) -> torch.Tensor:
        return linear(part.double()) @ direction

    heads, mlps, bias = [], [], torch.zeros((), dtype=torch.float64)
    for i, layer in enumerate(model.layers):
        parts, o_bias = _head_parts(layer.attn, acts[i, "head_out"][0, :, -1]), layer.attn.o_proj.bias
        post = _post_attention(layer, parts, o_bias)
        heads.append(score(scale * post(parts)))
        mlps.append(score(acts[i, "ffn_out"][0, -1]))
        if o_bias is not None:
            bias = bias + score(scale * post(o_bias.detach().double()))
    if getattr(model.final_norm, "bias", None) is not None:
        bias = bias + model.final_norm.bias.detach().double() @ direction
    if model.unembedding_bias is not None:  # Phi-1/2's lm_head bias: a part of the difference of its own
        bias = bias + (model.unembedding_bias[answer_id] - model.unembedding_bias[wrong_id]).detach().double() / divisor
    model_diff = float(logit_diff(logits, answer_id, wrong_id)[0])
    capped = model.config.final_softcap is not None
    total = float(_uncapped_diff(model, final, answer_id, wrong_id)) if capped else model_diff
    return LogitAttribution(total=total, embed=float(score(acts[0, "resid_pre"][0, -1])), bias=float(bias),
                            heads=torch.stack(heads), mlps=torch.stack(mlps),
                            capped_total=model_diff if capped else None)


def _uncapped_diff(model, final: torch.Tensor, answer_id: int, wrong_id: int) -> torch.Tensor:
    """The logit difference before the final soft-cap, from the final residual (d,)."""
    normed = model.final_norm(final.to(model.unembedding.dtype)[None])[0]
    return (model.unembedding[answer_id] - model.unembedding[wrong_id]) @ normed / model.config.logit_divisor
