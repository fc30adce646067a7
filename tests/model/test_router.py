"""The router abstraction (txviz.model.router) and the MoE FFN around it: the order of softmax and
top-k, renormalised gates or not, a router bias, shared experts with and without their sigmoid gate,
dense layers in a MoE model; each checked against its formula written out token by token."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.config import ConfigError
from txviz.model.ffn import GatedSharedExpertMoE, MoE, SharedExpertMoE, make_ffn
from txviz.model.router import Router, TopKSoftmaxRouter

ROUTER_CAPTURES = ("router_logits", "router_probs", "expert_ids", "expert_gates")
ROUTERS = {
    "softmax_topk_renormalised": dict(n_experts=4, top_k=2, router_norm="topk"),
    "softmax_topk_as_is": dict(n_experts=4, top_k=2, router_norm="all"),
    "topk_softmax": dict(n_experts=5, top_k=2, router_order="topk_softmax"),
    "topk_softmax_biased": dict(n_experts=5, top_k=3, router_order="topk_softmax", router_bias=True),
    "softmax_topk_biased": dict(n_experts=4, top_k=1, router_norm="all", router_bias=True),
    "shared_gated": dict(n_experts=4, top_k=2, router_norm="all", expert_hidden=16, shared_expert_hidden=40,
                         shared_expert_gate=True),
    "shared_ungated": dict(n_experts=4, top_k=2, shared_expert_hidden=24),
}


def expected_gates(config, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, gates) of one token's logits (E,), written from each family's description."""
    if config.router_order == "topk_softmax":  # Granite, gpt-oss: the k best logits, softmax over them
        top = torch.topk(logits, config.top_k)
        return top.indices, torch.softmax(top.values, dim=-1)
    top = torch.topk(torch.softmax(logits, dim=-1), config.top_k)  # Mixtral, Qwen, OLMoE
    return top.indices, top.values / top.values.sum() if config.router_norm == "topk" else top.values


def shared_part(moe, x: torch.Tensor) -> torch.Tensor:
    if isinstance(moe, GatedSharedExpertMoE):
        return torch.sigmoid(x @ moe.shared_expert_gate.weight[0]) * moe.shared_expert(x)
    return moe.shared_expert(x) if isinstance(moe, SharedExpertMoE) else torch.zeros_like(x)


@pytest.mark.parametrize("variant", sorted(ROUTERS))
def test_moe_equals_its_formula_token_by_token(variant):
    config = tiny_config(**ROUTERS[variant])
    torch.manual_seed(0)
    moe = make_ffn(config).eval()
    with torch.no_grad():
        if config.router_bias:
            moe.router.bias.normal_()
        x = torch.randn(2, 5, config.d_model)
        out = moe(x)
        for b in range(2):
            for t in range(5):
                logits = x[b, t] @ moe.router.weight.T + (moe.router.bias if config.router_bias else 0)
                chosen, gates = expected_gates(config, logits)
                routed = sum(g * moe.experts[int(e)](x[b, t]) for g, e in zip(gates, chosen))
                assert_close(out[b, t], routed + shared_part(moe, x[b, t]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", sorted(ROUTERS))
def test_captured_routing_is_the_routers(variant):
    config = tiny_config(**ROUTERS[variant])
    model = random_decoder(config)
    tr = trace(model, random_ids(config, 9), capture=ROUTER_CAPTURES)
    for slot, layer in enumerate(tr.layers):
        logits = tr["router_logits"][slot, 0]  # (T, E)
        assert_close(tr["router_probs"][slot, 0], torch.softmax(logits.float(), dim=-1))
        for t in range(logits.shape[0]):
            chosen, gates = expected_gates(config, logits[t].float())
            assert tr["expert_ids"][slot, 0, t].tolist() == chosen.tolist()
            assert_close(tr["expert_gates"][slot, 0, t], gates)


def test_the_router_is_picked_by_the_config():
    assert type(make_ffn(tiny_config(**ROUTERS["topk_softmax"])).router) is TopKSoftmaxRouter
    assert type(make_ffn(tiny_config(n_experts=4)).router) is Router
    assert make_ffn(tiny_config(n_experts=4)).router.bias is None  # no bias unless asked (Mixtral's checkpoints)
    assert type(make_ffn(tiny_config(**ROUTERS["shared_gated"]))) is GatedSharedExpertMoE
    assert type(make_ffn(tiny_config(**ROUTERS["shared_ungated"]))) is SharedExpertMoE
    assert type(make_ffn(tiny_config(n_experts=4))) is MoE


def test_topk_softmax_chooses_what_softmax_topk_renormalised_chooses():
    """Both orders pick the k largest logits, and their gates are the same numbers: softmax is monotone
    and softmax over the chosen equals the chosen probabilities renormalised."""
    base = tiny_config(n_experts=6, top_k=3)
    x = torch.randn(40, base.d_model)
    a = Router(base)
    b = TopKSoftmaxRouter(base.replace(router_order="topk_softmax"))
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        ra, rb = a.route(x), b.route(x)
    assert torch.equal(ra.chosen, rb.chosen)
    assert_close(ra.gates, rb.gates)
    assert_close(ra.probs, rb.probs)


def test_dense_layers_of_a_moe_model_have_a_dense_ffn_and_no_router_captures():
    config = tiny_config(n_layers=3, n_experts=4, top_k=2, dense_layers=(1,), expert_hidden=16)
    model = random_decoder(config)
    assert config.moe_layers == (0, 2)
    assert isinstance(model.layers[0].ffn, MoE) and isinstance(model.layers[2].ffn, MoE)
    assert not isinstance(model.layers[1].ffn, MoE)
    assert model.layers[1].ffn.up_proj.weight.shape == (config.ffn_hidden, config.d_model)
    assert model.layers[0].ffn.experts[0].up_proj.weight.shape == (16, config.d_model)
    everywhere = trace(model, random_ids(config, 7), capture=ROUTER_CAPTURES)
    assert "router_logits" not in everywhere  # layer 1 offers none: the layers must be asked for
    tr = trace(model, random_ids(config, 7), capture=ROUTER_CAPTURES, layers=config.moe_layers)
    assert tr.layers == (0, 2) and tr["expert_ids"].shape == (2, 1, 7, 2)


@pytest.mark.parametrize("bad, message", [
    (dict(n_experts=4, shared_expert_gate=True), "shared_expert_gate needs a shared expert"),
    (dict(n_experts=4, dense_layers=(2,)), "dense_layers"),
    (dict(n_experts=4, dense_layers=(0, 0)), "distinct"),
    (dict(n_experts=4, expert_hidden=0), "expert_hidden"),
    (dict(n_experts=4, shared_expert_hidden=-1), "shared_expert_hidden"),
    (dict(n_experts=4, router_order="sigmoid"), "router_order"),
    (dict(n_experts=4, router_order="topk_softmax", router_norm="all"), "router_norm must be 'topk'"),
    (dict(residual_scale=0.0), "residual_scale"),
    (dict(logit_divisor=float("nan")), "logit_divisor"),
])
def test_bad_expert_settings_are_refused(bad, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**bad)


def test_dense_layers_read_from_json_lists():
    config = tiny_config(n_experts=4, dense_layers=[0])
    assert config.dense_layers == (0,) and config.from_dict(config.to_dict()) == config
