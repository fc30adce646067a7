"""One decoder block, end to end, on the real tensors of a prompt (seed §2, §7):

    a = Norm₁(x) → h = x + Attention(a) → b = Norm₂(h) → y = h + FFN(b)

and the logit lens (nostalgebraist 2020): read the residual stream after every layer through the
final norm and the unembedding, as if the model stopped there. ``block_equation`` writes that block
for one config: its own norm (RMSNorm or LayerNorm) and FFN (SwiGLU, GELU MLP, or a mixture of either).
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


def norm_terms(config) -> tuple[str, str]:
    """(name, plain-text equation with ``{v}`` for the input) of the config's norm."""
    if config.norm == "rmsnorm":
        return "RMSNorm", "{v} / rms({v}) · w"
    return "LayerNorm", "({v} − mean({v})) / std({v}) · w + β"


def _gelu_name(config) -> str:
    return "GELU_tanh" if config.gelu_approximate == "tanh" else "GELU"


def ffn_terms(config) -> tuple[str, str]:
    """(name, plain-text equation on the normed input b) of the config's FFN, dense or mixture."""
    plus = " + bias" if config.mlp_bias else ""
    if config.ffn in ("swiglu", "geglu"):  # gated: SiLU (SwiGLU) or GELU (GeGLU) on the gate
        act = "SiLU" if config.ffn == "swiglu" else _gelu_name(config)
        name, eq = f"{'SwiGLU' if config.ffn == 'swiglu' else 'GeGLU'} FFN", f"W_down({act}(b W_gate) ⊙ b W_up){plus}"
    else:
        name, eq = f"{_gelu_name(config)} MLP", f"W_down {_gelu_name(config)}(b W_up){plus}"
    if config.is_moe:
        expert = f"W_down,e({act}(b W_gate,e) ⊙ b W_up,e)" if config.ffn != "gelu_mlp" else \
            f"W_down,e {_gelu_name(config)}(b W_up,e)"
        name = f"MoE FFN ({config.n_experts} {name} experts, top-{config.top_k})"
        eq = f"Σ_top-{config.top_k} g_e(b) · {expert}"
    return name, eq


_LATEX_NORM = {"rmsnorm": r"\mathrm{RMSNorm}", "layernorm": r"\mathrm{LayerNorm}"}
_LATEX_NORM_DEF = {"rmsnorm": r"\mathrm{RMSNorm}(v)=\frac{v}{\sqrt{\overline{v^2}+\epsilon}}\odot w",
                   "layernorm": r"\mathrm{LayerNorm}(v)=\frac{v-\bar v}{\sqrt{\mathrm{Var}(v)+\epsilon}}\odot w+\beta"}


def block_equation(config) -> str:
    """The LaTeX of one block of ``config``: its own norm, its own FFN (gated or not, dense or MoE)."""
    norm = _LATEX_NORM[config.norm]
    gelu = r"\mathrm{GELU}_{\tanh}" if config.gelu_approximate == "tanh" else r"\mathrm{GELU}"
    bias = r" + b_2" if config.mlp_bias else ""
    if config.ffn != "gelu_mlp":  # gated: SiLU (SwiGLU) or GELU (GeGLU)
        act = r"\mathrm{SiLU}" if config.ffn == "swiglu" else gelu
        ffn = rf"W_2\big({act}(W_1 \hat h)\odot W_3 \hat h\big)" + bias
        expert = rf"W_{{2,e}}\big({act}(W_{{1,e}} \hat h)\odot W_{{3,e}} \hat h\big)"
    else:
        ffn = rf"W_2\,{gelu}(W_1 \hat h{' + b_1' if config.mlp_bias else ''}){bias}"
        expert = rf"W_{{2,e}}\,{gelu}(W_{{1,e}} \hat h)"
    if config.is_moe:
        ffn = rf"\sum_{{e\in\mathrm{{top}}\text{{-}}{config.top_k}}} g_e(\hat h)\,{expert}"
    attn, ffn_post = rf"\mathrm{{MHA}}({norm}(x))", ffn
    if config.sandwich_norm:  # Gemma 2/3 normalize each sublayer's output again before adding it
        attn, ffn_post = rf"{norm}'\big({attn}\big)", rf"{norm}''\big({ffn}\big)"
    if config.parallel_block:  # GPT-NeoX: both sublayers read x
        return (rf"y = x + {attn} + {ffn_post},\quad \hat h={norm}_2(x),"
                rf"\qquad {_LATEX_NORM_DEF[config.norm]}")
    return (rf"h = x + {attn},\qquad y = h + {ffn_post},\quad \hat h={norm}(h),"
            rf"\qquad {_LATEX_NORM_DEF[config.norm]}")


@torch.inference_mode()
def block_walkthrough(model, x: torch.Tensor, layer: int) -> tuple[list[Step], torch.Tensor]:
    """x (T, d): the residual stream entering ``layer``. Recomputes the block's steps with its own
    modules; returns them and the stream leaving the layer (equal to the model's, a test checks it)."""
    block = model.layers[layer]
    x = x.to(model.embed.weight.device, model.embed.weight.dtype)[None]  # (1, T, d)
    positions = torch.arange(x.shape[1], device=x.device)
    ctx = model.layer_context(layer, positions, positions, x.dtype)  # the layer's own window and RoPE base
    parallel = model.config.parallel_block  # GPT-NeoX: the FFN reads x, not h, and both add at once
    a = block.attn_norm(x)
    attn = block.post_attn_norm(block.attn(a, ctx))  # post-norms: identity unless sandwich_norm (Gemma 2/3)
    h = x + attn
    b = block.ffn_norm(x if parallel else h)
    ffn = block.post_ffn_norm(block.ffn(b))
    y = ffn + attn + x if parallel else h + ffn  # the model's own order of the sum
    norm_name, norm_eq = norm_terms(model.config)
    ffn_name, ffn_eq = ffn_terms(model.config)
    steps = [
        _step("input x", "residual stream entering the block", x[0]),
        _step(f"{norm_name} (attention)", "a = " + norm_eq.format(v="x"), a[0]),
        _step("multi-head attention", "concat_h softmax(q kᵀ/√d + M) v · W_O", attn[0]),
        _step("residual add", "h = x + attention(a)" + (" (shown; the FFN reads x)" if parallel else ""), h[0]),
        _step(f"{norm_name} (FFN)", "b = " + norm_eq.format(v="x" if parallel else "h"), b[0]),
        _step(ffn_name, ffn_eq, ffn[0]),
        _step("residual add", "y = x + attention(a) + FFN(b)" if parallel else "y = h + FFN(b)", y[0]),
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
