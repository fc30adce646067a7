"""One decoder block, end to end, on the real tensors of a prompt:

    a = Norm₁(x) → h = x + Attention(a) → b = Norm₂(h) → y = h + FFN(b)

(Gemma 2/3 normalize each sublayer's output once more before adding it: h = x + Norm′(Attention(a));
OLMo 2 has only those norms: h = x + Norm′(Attention(x)); Phi-1/2's parallel FFN reads the attention's norm)

and the logit lens (nostalgebraist 2020): read the residual stream after every layer through the
final norm and the unembedding, as if the model stopped there. ``block_equation`` writes that block
for one config: its own norm (RMSNorm or LayerNorm) and FFN (SwiGLU, GELU MLP, or a mixture of either).
"""

from __future__ import annotations

import re
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


def _clamped(config, e: str = "") -> str:
    """gpt-oss's clamped SwiGLU on b, with expert subscript ``e`` (txviz.model.clamped_swiglu)."""
    limit, alpha = f"{config.swiglu_limit:g}", f"{config.swiglu_alpha:g}"
    return f"W_down{e}((clamp(b W_up{e}, ±{limit}) + 1) ⊙ g·σ({alpha}g)), g = min(b W_gate{e}, {limit})"


def ffn_terms(config, layer: int = 0) -> tuple[str, str]:
    """(name, plain-text equation on the normed input b) of layer ``layer``'s FFN, dense or mixture (with
    the shared expert every token runs through, where the model has one)."""
    plus = " + bias" if config.mlp_bias else ""
    if config.ffn == "swiglu_clamped":
        name, eq = "Clamped SwiGLU FFN", _clamped(config) + plus
        if config.is_moe_layer(layer):
            name = f"MoE FFN ({config.n_experts} {name} experts, top-{config.top_k})"
            eq = f"Σ_top-{config.top_k} g_e(b) · {_clamped(config, ',e')}"
        return name, eq
    if config.ffn in ("swiglu", "geglu"):  # gated: SiLU (SwiGLU) or GELU (GeGLU) on the gate
        act = "SiLU" if config.ffn == "swiglu" else _gelu_name(config)
        name, eq = f"{'SwiGLU' if config.ffn == 'swiglu' else 'GeGLU'} FFN", f"W_down({act}(b W_gate) ⊙ b W_up){plus}"
    else:
        name, eq = f"{_gelu_name(config)} MLP", f"W_down {_gelu_name(config)}(b W_up){plus}"
    if config.is_moe_layer(layer):
        expert = f"W_down,e({act}(b W_gate,e) ⊙ b W_up,e)" if config.ffn != "gelu_mlp" else \
            f"W_down,e {_gelu_name(config)}(b W_up,e)"
        shared = "" if not config.shared_expert_hidden else " + 1 shared, always on"
        name = f"MoE FFN ({config.n_experts} {name} experts, top-{config.top_k}{shared})"
        eq = f"Σ_top-{config.top_k} g_e(b) · {expert}"
        if config.shared_expert_hidden:
            eq += " + " + ("σ(b w_s) · " if config.shared_expert_gate else "") + "FFN_s(b)"
    return name, eq


_LATEX_NORM = {"rmsnorm": r"\mathrm{RMSNorm}", "layernorm": r"\mathrm{LayerNorm}"}
_LATEX_NORM_DEF = {"rmsnorm": r"\mathrm{RMSNorm}(v)=\frac{v}{\sqrt{\overline{v^2}+\epsilon}}\odot w",
                   "layernorm": r"\mathrm{LayerNorm}(v)=\frac{v-\bar v}{\sqrt{\mathrm{Var}(v)+\epsilon}}\odot w+\beta"}


def block_equation(config) -> str:
    """The LaTeX of one block of ``config``: its own norm, its own FFN (gated or not, dense or MoE)."""
    norm = _LATEX_NORM[config.norm]
    gelu = r"\mathrm{GELU}_{\tanh}" if config.gelu_approximate == "tanh" else r"\mathrm{GELU}"
    bias = r" + b_2" if config.mlp_bias else ""
    if config.ffn == "swiglu_clamped":  # gpt-oss: both branches clamped, a sharper sigmoid on the gate
        limit, alpha = f"{config.swiglu_limit:g}", f"{config.swiglu_alpha:g}"
        ffn = (rf"W_2\big((\mathrm{{clamp}}(W_3 \hat h,\pm {limit})+1)\odot g\,\sigma({alpha}g)\big)" + bias
               + rf",\ g=\min(W_1 \hat h,{limit})")
        expert = rf"W_{{2,e}}\big((\mathrm{{clamp}}(W_{{3,e}} \hat h,\pm {limit})+1)\odot g_e\,\sigma({alpha}g_e)\big)"
    elif config.ffn != "gelu_mlp":  # gated: SiLU (SwiGLU) or GELU (GeGLU)
        act = r"\mathrm{SiLU}" if config.ffn == "swiglu" else gelu
        ffn = rf"W_2\big({act}(W_1 \hat h)\odot W_3 \hat h\big)" + bias
        expert = rf"W_{{2,e}}\big({act}(W_{{1,e}} \hat h)\odot W_{{3,e}} \hat h\big)"
    else:
        ffn = rf"W_2\,{gelu}(W_1 \hat h{' + b_1' if config.mlp_bias else ''}){bias}"
        expert = rf"W_{{2,e}}\,{gelu}(W_{{1,e}} \hat h)"
    if config.is_moe:
        ffn = rf"\sum_{{e\in\mathrm{{top}}\text{{-}}{config.top_k}}} g_e(\hat h)\,{expert}"
        if config.shared_expert_hidden:  # Qwen-MoE: an expert every token runs through, outside the top-k
            gate = r"\sigma(w_s^\top \hat h)\," if config.shared_expert_gate else ""
            ffn += rf" + {gate}\mathrm{{FFN}}_s(\hat h)"
    attn, ffn_post = (rf"\mathrm{{MHA}}({norm}(x))" if config.pre_norm else r"\mathrm{MHA}(x)"), ffn
    if config.sandwich_norm:  # Gemma 2/3 and OLMo 2 normalize each sublayer's output before adding it
        attn, ffn_post = rf"{norm}'\big({attn}\big)", rf"{norm}''\big({ffn}\big)"
    if config.residual_scale != 1:  # Granite: each sublayer's output scaled before it joins the stream
        attn, ffn_post = rf"{config.residual_scale:g}\,{attn}", rf"{config.residual_scale:g}\,{ffn_post}"
    if config.parallel_block:  # GPT-NeoX: both sublayers read x; Phi-1/2 through the attention's own norm
        ffn_input = rf"\hat h={norm}(x)," if config.shared_block_norm else rf"\hat h={norm}_2(x),"
        lines = [rf"y = x + {attn} + {ffn_post},", ffn_input]
    else:
        lines = [rf"h = x + {attn},", rf"y = h + {ffn_post},\quad \hat h={norm + '(h)' if config.pre_norm else 'h'},"]
    # one line per part: on one line the norm's definition ran past the page's width (1440 px screens)
    return r"\begin{gathered}" + r" \\ ".join([*lines, _LATEX_NORM_DEF[config.norm]]) + r"\end{gathered}"


def attention_terms(config) -> str:
    """Plain text of the attention sublayer as the config runs it: QK-norm, the scores' scale and cap."""
    scale = "/√d" if config.query_scale is None else f"·{config.query_scale:.4g}"
    scores = f"q kᵀ{scale}"
    if config.attn_softcap is not None:  # Gemma 2: the scores are capped before the mask
        scores = f"{config.attn_softcap:g}·tanh({scores}/{config.attn_softcap:g})"
    text = f"concat_h softmax({scores} + M) v · W_O"
    if config.attn_sinks:  # gpt-oss: a learned logit per head joins each softmax, its column then dropped
        text = f"concat_h softmax([{scores} + M, s_h]) v · W_O, s_h a learned sink logit per head (no value)"
    if config.qk_norm:  # Gemma 3, Qwen3, Phi: each head's q and k are normalized over d_k; OLMo 2: all heads at once
        where = "each head's d_k" if config.qk_norm_scope == "head" else "all heads at once (H·d_k)"
        text = f"q, k ← {norm_terms(config)[0]} over {where} (QK-norm); " + text
    return text


def _steps(config, t: dict[str, torch.Tensor], layer: int = 0) -> list[Step]:
    """The rows of block_walkthrough from its tensors ``t`` (each (T, d)): the pre-norms where the block
    has them (not OLMo 2's), the post-norms where it has them (Gemma 2/3, OLMo 2), the FFN's own norm or
    the attention's shared one (Phi-1/2)."""
    parallel, sandwich, pre = config.parallel_block, config.sandwich_norm, config.pre_norm
    norm_name, norm_eq = norm_terms(config)
    ffn_name, ffn_eq = ffn_terms(config, layer)
    a, b = ("a", "b") if pre else ("x", "x" if parallel else "h")  # what each sublayer reads
    ffn_eq = ffn_eq if pre else re.sub(r"\bb\b", b, ffn_eq)  # the FFN reads the stream itself
    attn_term, ffn_term = (f"{norm_name}′(attention({a}))", f"{norm_name}″(FFN({b}))") if sandwich else \
        (f"attention({a})", f"FFN({b})")
    if config.residual_scale != 1:  # Granite: each sublayer's output scaled before it joins the stream
        attn_term, ffn_term = f"{config.residual_scale:g}·{attn_term}", f"{config.residual_scale:g}·{ffn_term}"
    ffn_norm_eq = "b = a (the attention's norm, shared)" if config.shared_block_norm else \
        "b = " + norm_eq.format(v="x" if parallel else "h")
    steps = [_step("input x", "residual stream entering the block", t["x"])]
    if pre:
        steps.append(_step(f"{norm_name} (attention)", "a = " + norm_eq.format(v="x"), t["a"]))
    steps.append(_step("multi-head attention", attention_terms(config), t["attn_raw"]))
    if sandwich:
        steps.append(_step(f"{norm_name}′ (post-attention)",
                           norm_eq.format(v=f"attention({a})").replace("· w", "· w′"), t["attn"]))
    steps.append(_step("residual add", f"h = x + {attn_term}" + (" (shown; the FFN reads x)" if parallel else ""),
                       t["h"]))
    if pre:
        steps.append(_step(f"{norm_name} (FFN)", ffn_norm_eq, t["b"]))
    steps.append(_step(ffn_name, ffn_eq, t["ffn_raw"]))
    if sandwich:
        steps.append(_step(f"{norm_name}″ (post-FFN)", norm_eq.format(v=f"FFN({b})").replace("· w", "· w″"),
                           t["ffn"]))
    steps.append(_step("residual add", f"y = x + {attn_term} + {ffn_term}" if parallel else f"y = h + {ffn_term}",
                       t["y"]))
    return steps


@torch.inference_mode()
def block_walkthrough(model, x: torch.Tensor, layer: int) -> tuple[list[Step], torch.Tensor]:
    """x (T, d): the residual stream entering ``layer``. Recomputes every step the block runs, in its
    order (txviz.model.transformer.Block.forward), with its own modules; returns them and the stream
    leaving the layer (equal to the model's, a test checks it). Sandwich norms (Gemma 2/3) get rows
    of their own, so the attention and FFN rows show those sublayers' own outputs."""
    config, block = model.config, model.layers[layer]
    x = x.to(model.embed.weight.device, model.embed.weight.dtype)[None]  # (1, T, d)
    positions = torch.arange(x.shape[1], device=x.device)
    ctx = model.layer_context(layer, positions, positions, x.dtype)  # the layer's own window and RoPE base
    parallel = config.parallel_block  # GPT-NeoX, Phi: the FFN reads x, not h
    a = block.attn_norm(x)  # identity without pre-norms (OLMo 2)
    attn_raw = block.attn(a, ctx)
    attn = block.scale_residual(block.post_attn_norm(attn_raw))  # post-norm with sandwich_norm; × m (Granite)
    h = x + attn
    b = block.ffn_norm(x if parallel else h)
    ffn_raw = block.ffn(b)
    ffn = block.scale_residual(block.post_ffn_norm(ffn_raw))
    y = ffn + attn + x if parallel else h + ffn  # the model's own order of the sum
    tensors = dict(x=x, a=a, attn_raw=attn_raw, attn=attn, h=h, b=b, ffn_raw=ffn_raw, ffn=ffn, y=y)
    steps = _steps(config, {name: t[0] for name, t in tensors.items()}, layer)
    return steps, y[0].cpu()


@torch.inference_mode()
def logit_lens(model, resid: torch.Tensor, top: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """resid (L+1, d) at one position → (probabilities, token ids), each (L+1, top): the model's
    next-token guesses if it stopped after each layer (row 0: right after the embedding)."""
    x = resid.to(model.embed.weight.device, model.embed.weight.dtype)
    # the model's own last step: divided by logit_divisor (Granite), soft-capped (Gemma 2)
    logits = model.cap_logits(F.linear(model.final_norm(x), model.unembedding, model.unembedding_bias)).float()
    probs = logits.softmax(dim=-1)
    values, ids = probs.topk(top, dim=-1)
    return values.cpu(), ids.cpu()
