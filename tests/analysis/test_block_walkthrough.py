"""block_walkthrough lists every step a block runs, each row with the tensor it names: checked against
the trace's own captures (the sublayers' outputs that join the residual, the attention maps and values,
the layer outputs) on the tiny Gemma 3 stand-in (sandwich norms, QK-norm) and a plain pre-norm model."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.gemma_standin import GEMMA_LIKE
from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.analysis.block import block_equation, block_walkthrough
from txviz.capture.trace import trace
from txviz.model.attention import repeat_kv

N_TOKENS = 11
CAPTURE = ["resid", "attn_out", "ffn_out", "attn_probs", "v"]


def _mean_norm(x: torch.Tensor) -> float:
    return float(x.float().norm(dim=-1).mean())


def _own_attention(model, tr, layer: int) -> torch.Tensor:
    """The attention sublayer's own output (T, d), before any post-norm: the traced maps times the
    traced values, heads concatenated, through W_O."""
    attn = model.layers[layer].attn
    probs = torch.stack([tr.attn(layer, head) for head in range(model.config.n_heads)])  # (H, T, T)
    v = repeat_kv(tr.get("v", layer), attn.n_groups)[0]  # (H, T, D)
    heads = torch.matmul(probs, v)  # (H, T, D)
    return attn.o_proj(heads.transpose(0, 1).reshape(heads.shape[1], -1))  # (T, H·D) -> (T, d)


def _reference_rows(model, tr, layer: int) -> dict[str, torch.Tensor]:
    """Each step's tensor from the trace, and from the block's own modules where no capture holds it."""
    block, x = model.layers[layer], tr["resid"][layer, 0]
    attn_joined, ffn_joined = tr.get("attn_out", layer)[0], tr.get("ffn_out", layer)[0]  # what joins the stream
    h = x + attn_joined
    return {"input x": x, "norm (attention)": block.attn_norm(x), "multi-head attention": _own_attention(model, tr, layer),
            "post-attention": attn_joined, "h": h, "norm (FFN)": block.ffn_norm(h),
            "FFN": block.ffn(block.ffn_norm(h)), "post-FFN": ffn_joined, "y": tr["resid"][layer + 1, 0]}


@torch.inference_mode()
@pytest.mark.parametrize("layer", [3, 5])  # a sliding layer and the global one
def test_gemma_rows_name_the_post_norms_and_show_each_sublayer_s_own_output(layer):
    model = random_decoder(GEMMA_LIKE)
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=CAPTURE)
    steps, out = block_walkthrough(model, tr["resid"][layer, 0], layer)
    assert [s.name for s in steps] == ["input x", "RMSNorm (attention)", "multi-head attention",
                                       "RMSNorm′ (post-attention)", "residual add", "RMSNorm (FFN)", "GeGLU FFN",
                                       "RMSNorm″ (post-FFN)", "residual add"]
    expected = list(_reference_rows(model, tr, layer).values())
    assert [s.mean_norm for s in steps] == pytest.approx([_mean_norm(t) for t in expected], rel=1e-5)
    assert_close(out, tr["resid"][layer + 1, 0], rtol=1e-5, atol=1e-5)
    assert "QK-norm" in steps[2].equation
    assert steps[4].equation == "h = x + RMSNorm′(attention(a))" and steps[8].equation == "y = h + RMSNorm″(FFN(b))"


@torch.inference_mode()
def test_a_pre_norm_block_has_no_post_norm_rows_and_no_qk_norm():
    model = random_decoder(tiny_config(n_kv_heads=2))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=CAPTURE)
    for layer in range(model.config.n_layers):
        steps, out = block_walkthrough(model, tr["resid"][layer, 0], layer)
        rows = _reference_rows(model, tr, layer)
        assert_close(rows["multi-head attention"], rows["post-attention"])  # no post-norm: one tensor
        del rows["post-attention"], rows["post-FFN"]
        assert [s.name for s in steps] == ["input x", "RMSNorm (attention)", "multi-head attention", "residual add",
                                           "RMSNorm (FFN)", "SwiGLU FFN", "residual add"]
        assert [s.mean_norm for s in steps] == pytest.approx([_mean_norm(t) for t in rows.values()], rel=1e-5)
        assert_close(out, tr["resid"][layer + 1, 0], rtol=1e-5, atol=1e-5)
        assert "QK-norm" not in steps[2].equation and steps[3].equation == "h = x + attention(a)"


def test_the_attention_row_names_qk_norm_the_scale_and_the_cap_only_where_the_model_has_them():
    model = random_decoder(tiny_config(qk_norm=True, query_scale=0.125, attn_softcap=50.0))
    steps, _ = block_walkthrough(model, torch.randn(4, model.config.d_model), 0)
    assert steps[2].equation == ("q, k ← RMSNorm over each head's d_k (QK-norm); "
                                 "concat_h softmax(50·tanh(q kᵀ·0.125/50) + M) v · W_O")


@torch.inference_mode()
def test_a_post_norm_only_block_has_no_pre_norm_rows_and_names_its_qk_norm_across_heads():
    """OLMo 2: the sublayers read the stream itself; their outputs are normalized before they join it."""
    model = random_decoder(tiny_config(n_kv_heads=2, pre_norm=False, sandwich_norm=True, qk_norm=True,
                                       qk_norm_scope="all_heads"))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=CAPTURE)
    steps, out = block_walkthrough(model, tr["resid"][0, 0], 0)
    rows = _reference_rows(model, tr, 0)
    del rows["norm (attention)"], rows["norm (FFN)"]
    rows["FFN"] = model.layers[0].ffn(rows["h"])
    assert [s.name for s in steps] == ["input x", "multi-head attention", "RMSNorm′ (post-attention)", "residual add",
                                       "SwiGLU FFN", "RMSNorm″ (post-FFN)", "residual add"]
    assert [s.mean_norm for s in steps] == pytest.approx([_mean_norm(t) for t in rows.values()], rel=1e-5)
    assert_close(out, tr["resid"][1, 0], rtol=1e-5, atol=1e-5)
    assert steps[1].equation.startswith("q, k ← RMSNorm over all heads at once (H·d_k) (QK-norm); ")
    assert (steps[3].equation, steps[6].equation) == ("h = x + RMSNorm′(attention(x))", "y = h + RMSNorm″(FFN(h))")
    assert steps[4].equation == "W_down(SiLU(h W_gate) ⊙ h W_up)"


@torch.inference_mode()
def test_a_shared_norm_parallel_block_shows_the_ffn_reading_the_attention_s_norm():
    """Phi-1/2: one LayerNorm, read by attention and MLP alike; QK-norm as a LayerNorm per head."""
    model = random_decoder(tiny_config(norm="layernorm", ffn="gelu_mlp", parallel_block=True, shared_block_norm=True,
                                       qk_norm=True, rotary_dims=4, lm_head_bias=True))
    x = trace(model, random_ids(model.config, N_TOKENS), capture=["resid"])["resid"][1, 0]
    steps, out = block_walkthrough(model, x, 1)
    by_name = {s.name: s for s in steps}
    assert by_name["LayerNorm (FFN)"].equation == "b = a (the attention's norm, shared)"
    assert by_name["LayerNorm (FFN)"].mean_norm == by_name["LayerNorm (attention)"].mean_norm
    assert steps[2].equation.startswith("q, k ← LayerNorm over each head's d_k (QK-norm); ")
    layer = model.layers[1]
    ctx = model.layer_context(1, torch.arange(N_TOKENS), torch.arange(N_TOKENS), x.dtype)
    normed = layer.attn_norm(x[None])
    assert_close(out, (x[None] + layer.attn(normed, ctx) + layer.ffn(normed))[0], rtol=1e-5, atol=1e-5)


def test_the_block_equation_follows_where_the_norms_sit():
    from txviz.analysis.block import block_equation

    olmo2 = block_equation(tiny_config(pre_norm=False, sandwich_norm=True))
    assert r"\mathrm{RMSNorm}'\big(\mathrm{MHA}(x)\big)" in olmo2 and r"\hat h=h," in olmo2
    phi = block_equation(tiny_config(norm="layernorm", ffn="gelu_mlp", parallel_block=True, shared_block_norm=True))
    assert r"\hat h=\mathrm{LayerNorm}(x)," in phi and r"\mathrm{LayerNorm}_2" not in phi
    plain = block_equation(tiny_config())
    assert r"\mathrm{MHA}(\mathrm{RMSNorm}(x))" in plain and r"\hat h=\mathrm{RMSNorm}(h)," in plain


@torch.inference_mode()
def test_granite_s_residual_multiplier_is_in_the_rows_and_the_stream():
    """Granite: each sublayer's output times residual_scale before it joins the stream; the walkthrough's
    output is the model's own next residual."""
    model = random_decoder(tiny_config(n_kv_heads=2, n_experts=4, top_k=2, router_order="topk_softmax",
                                       residual_scale=0.4, logit_divisor=3.0))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=CAPTURE)
    steps, out = block_walkthrough(model, tr["resid"][1, 0], 1)
    assert_close(out, tr["resid"][2, 0], rtol=1e-5, atol=1e-5)
    assert steps[3].equation == "h = x + 0.4·attention(a)" and steps[6].equation == "y = h + 0.4·FFN(b)"
    assert r"0.4\,\mathrm{MHA}" in block_equation(model.config)


@torch.inference_mode()
def test_a_moe_model_s_dense_layer_and_shared_expert_are_named_per_layer():
    model = random_decoder(tiny_config(n_layers=3, n_experts=4, top_k=2, dense_layers=(1,), shared_expert_hidden=16,
                                       shared_expert_gate=True))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=CAPTURE)
    for layer, name in ((0, "MoE FFN (4 SwiGLU FFN experts, top-2 + 1 shared, always on)"), (1, "SwiGLU FFN")):
        steps, out = block_walkthrough(model, tr["resid"][layer, 0], layer)
        assert steps[5].name == name
        assert_close(out, tr["resid"][layer + 1, 0], rtol=1e-5, atol=1e-5)
    assert steps[5].equation == "W_down(SiLU(b W_gate) ⊙ b W_up)"
    assert block_walkthrough(model, tr["resid"][0, 0], 0)[0][5].equation.endswith(" + σ(b w_s) · FFN_s(b)")
    assert r"\sigma(w_s^\top \hat h)\,\mathrm{FFN}_s(\hat h)" in block_equation(model.config)


@torch.inference_mode()
def test_the_logit_lens_ends_as_the_model_does():
    """Its last row is the model's own next-token distribution (Granite divides the logits)."""
    from txviz.analysis.block import logit_lens

    model = random_decoder(tiny_config(logit_divisor=3.0))
    tr = trace(model, random_ids(model.config, N_TOKENS), capture=["resid", "logits"])
    probs, ids = logit_lens(model, tr["resid"][:, 0, -1])
    expected = tr["logits"][0, -1].softmax(dim=-1).topk(5)
    assert_close(probs[-1], expected.values) and torch.equal(ids[-1], expected.indices)


def test_gpt_oss_rows_name_the_sink_and_the_clamped_experts_and_end_at_the_layer_output():
    from txviz.analysis.block import block_equation

    config = tiny_config(attn_sinks=True, n_experts=4, top_k=2, router_order="topk_softmax", router_bias=True,
                         ffn="swiglu_clamped", mlp_bias=True, swiglu_limit=0.5, layer_types=("sliding", "full"),
                         sliding_window=4, qkv_bias=True, out_bias=True)
    model = random_decoder(config)
    with torch.no_grad():
        for block in model.layers:
            block.attn.sinks.copy_(torch.linspace(-1, 1, config.n_heads))
    tr = trace(model, random_ids(config, N_TOKENS), capture=["resid"])
    for layer in range(2):
        steps, out = block_walkthrough(model, tr["resid"][layer, 0], layer)
        assert_close(out, tr["resid"][layer + 1, 0], rtol=1e-5, atol=1e-5)
        names = {step.name: step.equation for step in steps}
        assert "learned sink" in names["multi-head attention"]
        assert "clamp(b W_up,e, ±0.5) + 1" in names["MoE FFN (4 Clamped SwiGLU FFN experts, top-2)"]
    assert r"\mathrm{clamp}" in block_equation(config)
