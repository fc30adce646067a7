"""One decoder block, end to end, on the real tensors of a prompt (seed §2, §7):

    a = Norm₁(x) → h = x + Attention(a) → b = Norm₂(h) → y = h + FFN(b)

and the logit lens (nostalgebraist 2020): read the residual stream after every layer through the
final norm and the unembedding, as if the model stopped there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class Step:
    name: str
    equation: str
    shape: tuple[int, ...]
    mean_norm: float  # mean L2 norm over tokens of the result


def _step(name: str, equation: str, x: torch.Tensor) -> Step:
    return Step(name, equation, tuple(x.shape), float(x.float().norm(dim=-1).mean()))


@torch.inference_mode()
def block_walkthrough(model, x: torch.Tensor, layer: int) -> tuple[list[Step], torch.Tensor]:
    """x (T, d): the residual stream entering ``layer``. Recomputes the block's steps with its own
    modules; returns them and the stream leaving the layer (equal to the model's, a test checks it)."""
    block = model.layers[layer]
    x = x.to(model.embed.weight.device, model.embed.weight.dtype)[None]  # (1, T, d)
    from txviz.model.attention import AttentionContext

    positions = torch.arange(x.shape[1], device=x.device)
    ctx = AttentionContext(model.positions, positions, positions, model.config.sliding_window, x.dtype)
    a = block.attn_norm(x)
    attn = block.attn(a, ctx)
    h = x + attn
    b = block.ffn_norm(h)
    ffn = block.ffn(b)
    y = h + ffn
    norm_name = "RMSNorm" if model.config.norm == "rmsnorm" else "LayerNorm"
    ffn_name = "SwiGLU FFN" if model.config.ffn == "swiglu" else "GELU MLP"
    ffn_eq = "W_down(SiLU(b W_gate) ⊙ b W_up)" if model.config.ffn == "swiglu" else "W_down GELU(b W_up)"
    if model.config.is_moe:
        ffn_name, ffn_eq = f"MoE FFN ({model.config.n_experts} experts, top-{model.config.top_k})", "Σ_top-k g_e(b) FFN_e(b)"
    steps = [
        _step("input x", "residual stream entering the block", x[0]),
        _step(f"{norm_name} (attention)", "a = x / rms(x) · w", a[0]),
        _step("multi-head attention", "concat_h softmax(q kᵀ/√d + M) v · W_O", attn[0]),
        _step("residual add", "h = x + attention(a)", h[0]),
        _step(f"{norm_name} (FFN)", "b = h / rms(h) · w", b[0]),
        _step(ffn_name, ffn_eq, ffn[0]),
        _step("residual add", "y = h + FFN(b)", y[0]),
    ]
    return steps, y[0].cpu()


@torch.inference_mode()
def logit_lens(model, resid: torch.Tensor, top: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """resid (L+1, d) at one position → (probabilities, token ids), each (L+1, top): the model's
    next-token guesses if it stopped after each layer (row 0: right after the embedding)."""
    x = resid.to(model.embed.weight.device, model.embed.weight.dtype)
    logits = F.linear(model.final_norm(x), model.unembedding).float()  # (L+1, V)
    probs = logits.softmax(dim=-1)
    values, ids = probs.topk(top, dim=-1)
    return values.cpu(), ids.cpu()
