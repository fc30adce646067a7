"""Mixture of Experts: y = Σ_{e ∈ TopK(g(x))} g_e(x) · FFN_e(x), checked through the
captured router_logits / router_probs / expert_ids / expert_gates and against a dense FFN."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.model.ffn import MoE, make_expert

ROUTER_CAPTURES = ("router_logits", "router_probs", "expert_ids", "expert_gates")
MOE_VARIANTS = {
    "top2_of_4_topk": dict(n_experts=4, top_k=2, router_norm="topk"),
    "top2_of_4_all": dict(n_experts=4, top_k=2, router_norm="all"),
    "top1_of_8_topk": dict(n_experts=8, top_k=1, router_norm="topk"),
    "top3_of_6_all_gelu": dict(n_experts=6, top_k=3, router_norm="all", ffn="gelu_mlp"),
}


def routing(variant: str, n_tokens: int = 11):
    config = tiny_config(**MOE_VARIANTS[variant])
    tr = trace(random_decoder(config), random_ids(config, n_tokens), capture=ROUTER_CAPTURES)
    return config, tr


@pytest.mark.parametrize("variant", sorted(MOE_VARIANTS))
def test_router_probs_are_the_softmax_of_router_logits(variant):
    _, tr = routing(variant)
    assert_close(tr["router_probs"], torch.softmax(tr["router_logits"].float(), dim=-1))


@pytest.mark.parametrize("variant", sorted(MOE_VARIANTS))
def test_chosen_experts_are_the_top_k_of_the_router(variant):
    config, tr = routing(variant)
    probs, chosen = tr["router_probs"], tr["expert_ids"]  # (L, B, T, E), (L, B, T, K)
    assert chosen.shape[-1] == config.top_k
    chosen_probs = probs.gather(-1, chosen)
    best_unchosen = probs.scatter(-1, chosen, -1.0).amax(dim=-1, keepdim=True)
    assert (chosen_probs >= best_unchosen).all()
    assert (chosen.sort(dim=-1).values.diff(dim=-1) > 0).all()  # k distinct experts per token


@pytest.mark.parametrize("variant", sorted(MOE_VARIANTS))
def test_gate_weights_follow_the_router_norm(variant):
    config, tr = routing(variant)
    gates = tr["expert_gates"]
    chosen_probs = tr["router_probs"].gather(-1, tr["expert_ids"])
    if config.router_norm == "topk":  # Mixtral: renormalized over the chosen experts
        assert_close(gates.sum(dim=-1), torch.ones(gates.shape[:-1]))
        assert_close(gates, chosen_probs / chosen_probs.sum(dim=-1, keepdim=True))
    else:  # Switch / Qwen-MoE: the softmax probabilities as they are
        assert_close(gates, chosen_probs)
        assert (gates.sum(dim=-1) <= 1 + 1e-6).all()


@pytest.mark.parametrize("variant", sorted(MOE_VARIANTS))
def test_moe_layer_equals_its_formula_token_by_token(variant):
    config = tiny_config(**MOE_VARIANTS[variant])
    torch.manual_seed(0)
    moe = MoE(config).eval()
    x = torch.randn(2, 5, config.d_model)
    with torch.no_grad():
        out = moe(x)
        for b in range(2):
            for t in range(5):
                probs = torch.softmax(moe.router(x[b, t]), dim=-1)
                top = torch.topk(probs, config.top_k)
                gates = top.values / top.values.sum() if config.router_norm == "topk" else top.values
                expected = sum(g * moe.experts[int(e)](x[b, t]) for g, e in zip(gates, top.indices))
                assert_close(out[b, t], expected, rtol=1e-5, atol=1e-6)


def moe_with_identical_experts(moe_config, dense_model):
    """An MoE model whose experts are all copies of ``dense_model``'s FFN, other weights shared."""
    moe_model = random_decoder(moe_config, seed=1)
    state = dict(moe_model.state_dict())
    for name, tensor in dense_model.state_dict().items():
        if ".ffn." not in name:
            state[name] = tensor
            continue
        layer, rest = name.split(".ffn.")
        for e in range(moe_config.n_experts):
            state[f"{layer}.ffn.experts.{e}.{rest}"] = tensor
    moe_model.load_state_dict(state)
    return moe_model


@pytest.mark.parametrize("variant", sorted(MOE_VARIANTS))
def test_identical_experts_reduce_to_the_dense_ffn(variant):
    moe_config = tiny_config(**MOE_VARIANTS[variant])
    dense_config = moe_config.replace(n_experts=0)
    dense = random_decoder(dense_config)
    moe = moe_with_identical_experts(moe_config, dense)
    ids = random_ids(dense_config, 9)
    with torch.inference_mode():
        if moe_config.router_norm == "topk":  # the gates sum to 1: exactly one dense FFN
            assert_close(moe(ids), dense(ids), rtol=1e-5, atol=1e-5)
        else:  # the gates sum to the chosen probability mass: a scaled dense FFN, so not equal
            assert not torch.allclose(moe(ids), dense(ids), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("router_norm", ["topk", "all"])
def test_identical_experts_scale_the_dense_ffn_by_the_gate_sum(router_norm):
    config = tiny_config(n_experts=4, top_k=2, router_norm=router_norm)
    torch.manual_seed(0)
    moe, expert = MoE(config), make_expert(config)
    for e in range(config.n_experts):
        moe.experts[e].load_state_dict(expert.state_dict())
    x = torch.randn(3, 6, config.d_model)
    with torch.no_grad():
        probs = torch.softmax(moe.router(x), dim=-1)
        gate_sum = torch.topk(probs, 2).values.sum(dim=-1, keepdim=True)  # (B, T, 1)
        scale = torch.ones_like(gate_sum) if router_norm == "topk" else gate_sum
        assert_close(moe(x), scale * expert(x), rtol=1e-5, atol=1e-6)
