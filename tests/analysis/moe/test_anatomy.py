"""A MoE config's routing in words (txviz.analysis.moe.anatomy): the numbers and choices it names are
the config's own, for each router the families use."""

from __future__ import annotations

from tests.helpers.tiny import tiny_config
from txviz.analysis.moe.anatomy import describe_routing, gate_rule, shared_rule


def test_dense_layers_and_the_shared_expert_are_named():
    config = tiny_config(n_layers=4, n_experts=6, top_k=2, router_norm="all", expert_hidden=20, dense_layers=(0, 2),
                         shared_expert_hidden=40, shared_expert_gate=True)
    text = describe_routing(config)
    assert "2 of 6 experts (20 wide) in 2 of its 4 layers (layers 0, 2 keep a dense FFN)" in text
    assert "shared expert (40 wide) runs on every token, outside the top-2, scaled per token by a sigmoid" in text
    assert "as the softmax gives them" in gate_rule(config)


def test_each_router_reads_as_itself():
    assert "renormalised to sum to 1" in gate_rule(tiny_config(n_experts=4, top_k=2, router_norm="topk"))
    assert gate_rule(tiny_config(n_experts=4, top_k=3, router_order="topk_softmax")).startswith(
        "the 3 largest router logits, then a softmax over those 3")
    assert "(with a bias)" in gate_rule(tiny_config(n_experts=4, router_bias=True))
    assert shared_rule(tiny_config(n_experts=4)) is None
    assert "added with weight 1" in shared_rule(tiny_config(n_experts=4, shared_expert_hidden=8))
    assert "in every one of its 2 layers" in describe_routing(tiny_config(n_experts=4))
