"""A norm applied to a sum of parts, split into one term per part with the scale of the whole.

RMSNorm(x) = w ⊙ x / rms(x) and LayerNorm(x) = w ⊙ (x − mean x) / σ(x) + b are linear in x once the
scale (rms or σ) is fixed. With it frozen at the whole sum's own value, norm(Σ parts) = Σ frozen(part)
(+ b) exactly, and each term is that part's share of the normed vector (Elhage et al. 2021, "A
Mathematical Framework", on freezing the LayerNorm scale; txviz.causal.dla does the same for the final
norm). Used for the post-attention norm of Gemma's sandwich blocks (each head's share of the normed
attention output) and for the query–key breakdown (the pre-attention norm and QK-norm, frozen at the
clean run). Computed in the parts' dtype; the model's norms compute in float32 and cast back, which is the
same arithmetic for float32 models.
"""

from __future__ import annotations

import torch
from torch import nn

from txviz.model.norm import LayerNorm, RMSNorm


def frozen_shares(norm: nn.Module, parts: torch.Tensor, whole: torch.Tensor | None = None,
                  part_dim: int = -2) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(shares, bias): ``parts`` (…, P, …, X) along ``part_dim``, each mapped by ``norm`` with the scale
    of ``whole`` (the parts' sum unless given), and the norm's bias (X,) or None. Σ shares + bias =
    norm(whole). The identity norm returns the parts as they are."""
    if isinstance(norm, nn.Identity):
        return parts, None
    whole = parts.sum(part_dim) if whole is None else whole
    whole32 = whole.float()
    if isinstance(norm, RMSNorm):
        scale = torch.rsqrt(whole32.pow(2).mean(-1, keepdim=True) + norm.eps)
        return norm.weight * (parts.float() * scale.unsqueeze(part_dim)).to(parts.dtype), None
    if isinstance(norm, LayerNorm):
        scale = torch.rsqrt(whole32.var(-1, unbiased=False, keepdim=True) + norm.eps)
        centred = parts.float() - parts.float().mean(-1, keepdim=True)
        return norm.weight * (centred * scale.unsqueeze(part_dim)).to(parts.dtype), norm.bias
    raise TypeError(f"no frozen form for {type(norm).__name__}")
