"""txviz.analysis.moe.routing: routing statistics on hand-built routings, the balancing loss against its
formula and against transformers' Mixtral, and parameters/FLOPs against the memory module and real
models (dense and MoE)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz import trace
from txviz.analysis.kv.memory_model import preset
from txviz.analysis.moe import routing as moe
from txviz.analysis.tradeoffs.formulas import REFERENCES
from txviz.model.counts import count_active_params, count_params, expert_matmul_params, flops_per_token


# ---- the balancing loss on hand examples ----------------------------------------------------------
def test_uniform_routing_costs_one():
    logits = torch.zeros(12, 4)  # P_e = 1/4
    chosen = (torch.arange(12) % 4)[:, None]  # f_e = 1/4
    assert_close(moe.load_balancing_loss(logits, chosen), torch.tensor(1.0))


@pytest.mark.parametrize("expert", [0, 2])
def test_every_token_on_one_expert_costs_n_experts_times_its_probability(expert):
    logits = torch.randn(7, 4, generator=torch.Generator().manual_seed(1))
    chosen = torch.full((7, 1), expert)
    p_e = torch.softmax(logits, dim=-1)[:, expert].mean()
    assert_close(moe.load_balancing_loss(logits, chosen), 4 * p_e)


def test_top_k_choices_are_all_counted():
    chosen = torch.tensor([[0, 1], [0, 2], [0, 1]])  # 6 assignments: 3, 2, 1, 0
    assert_close(moe.expert_load(chosen, 4), torch.tensor([3, 2, 1, 0]) / 6)
    logits = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]])).expand(3, 4)
    assert_close(moe.load_balancing_loss(logits, chosen), torch.tensor(4 * (0.5 * 0.4 + 2 / 6 * 0.3 + 1 / 6 * 0.2)))


# ---- load, effective experts, CV, entropy on hand-built routings ------------------------------------
def test_load_and_its_spread_on_a_hand_built_routing():
    chosen = torch.tensor([[0], [0], [1], [3]])
    load = moe.expert_load(chosen, 4)
    assert_close(load, torch.tensor([0.5, 0.25, 0.0, 0.25]))
    assert_close(moe.load_cv(load), torch.tensor(math.sqrt(0.03125) / 0.25))  # population std / mean
    assert moe.effective_experts(load) == pytest.approx(math.exp(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))))


@pytest.mark.parametrize("n_experts", [2, 4, 8])
def test_even_and_collapsed_loads_are_the_extremes(n_experts):
    even, collapsed = torch.full((n_experts,), 1 / n_experts), torch.eye(n_experts)[0]
    assert moe.effective_experts(even) == pytest.approx(n_experts)
    assert moe.effective_experts(collapsed) == pytest.approx(1.0)
    assert float(moe.load_cv(even)) == pytest.approx(0.0, abs=1e-6)
    assert float(moe.load_cv(collapsed)) == pytest.approx(math.sqrt(n_experts - 1))


def test_router_entropy_and_ranked_probabilities():
    probs = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0]])
    assert_close(moe.router_entropy(probs), torch.tensor([math.log(4), 0.0, math.log(2)]))
    ranked = moe.ranked_probs(probs)
    assert_close(ranked, torch.tensor([(0.25 + 1 + 0.5) / 3, (0.25 + 0.5) / 3, 0.25 / 3, 0.25 / 3]))
    assert_close(ranked.sum(), torch.tensor(1.0))


# ---- from a trace ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def moe_trace():
    config = tiny_config(n_kv_heads=2, n_experts=4, top_k=2)
    model = random_decoder(config)
    return config, trace(model, random_ids(config, 13, batch=2), capture=moe.ROUTER_CAPTURES)


def test_routing_of_one_sequence_and_of_the_batch(moe_trace):
    config, tr = moe_trace
    one, pooled = moe.routing(tr, batch=1), moe.routing(tr)
    assert (one.n_experts, one.top_k, one.n_tokens, pooled.n_tokens) == (4, 2, 13, 26)
    assert_close(one.expert_ids, tr["expert_ids"][:, 1])
    assert_close(one.load.sum(dim=-1), torch.ones(config.n_layers))
    for layer in range(config.n_layers):
        assert_close(pooled.aux_loss[layer], moe.load_balancing_loss(tr["router_logits"][layer], tr["expert_ids"][layer]))
        assert_close(pooled.load[layer], moe.expert_load(tr["expert_ids"][layer], 4))
    assert (one.entropy <= math.log(4) + 1e-6).all() and (one.entropy >= 0).all()
    rows = pooled.summary()
    assert [r["layer"] for r in rows] == list(tr.layers) and all(1 <= r["effective_experts"] <= 4 for r in rows)


def test_measure_routing_refuses_a_dense_model():
    with pytest.raises(ValueError, match="dense"):
        moe.measure_routing(random_decoder(tiny_config()), torch.zeros(1, 3, dtype=torch.long))


# ---- what a token costs ----------------------------------------------------------------------------
def test_capacity_of_a_moe_against_its_dense_twin():
    dense, sparse = tiny_config(n_kv_heads=2), tiny_config(n_kv_heads=2, n_experts=4, top_k=2)
    d, s = moe.capacity(dense), moe.capacity(sparse)
    expert = expert_matmul_params(dense)
    router = sparse.n_layers * sparse.d_model * sparse.n_experts
    assert s.total_params - d.total_params == sparse.n_layers * 3 * expert + router
    assert s.active_params - d.active_params == sparse.n_layers * expert + router
    assert s.flops_per_token - d.flops_per_token == 2 * (sparse.n_layers * expert + router)
    assert s.active_share < 1 == d.active_share and s.params_per_flop > d.params_per_flop


def test_mixtral_reference_matches_the_published_counts():
    mixtral, mistral = REFERENCES["mixtral-8x7b"], REFERENCES["mistral-7b"]
    published = preset("mixtral-8x7b")
    assert count_params(mixtral) == published.n_params and count_active_params(mixtral) == published.active_params
    assert count_params(mistral) == 7_241_732_096
    # same attention, 8 experts of Mistral's FFN, 2 run: FLOPs/token grow by one FFN and the router
    layers = mixtral.n_layers
    extra = layers * (2 * expert_matmul_params(mistral) + 2 * mixtral.d_model * 8)
    assert flops_per_token(mixtral, 4096) - flops_per_token(mistral, 4096) == extra


# ---- a Mixtral checkpoint written by transformers ---------------------------------------------------
@pytest.fixture(scope="module")
def mixtral_dir(tmp_path_factory):
    from tests.helpers.tiny_hf import build, save

    hf_model = build("mixtral")
    return hf_model, save(hf_model, tmp_path_factory.mktemp("mixtral"))


@needs_transformers
def test_routing_of_a_hugging_face_mixtral_matches_transformers(mixtral_dir):
    from tests.helpers.tiny_hf import random_ids as hf_ids
    from txviz.loading import load

    hf_model, directory = mixtral_dir
    loaded = load(directory, device="cpu")
    config = loaded.config
    assert (config.n_experts, config.top_k, config.router_norm) == (4, 2, "topk")
    assert moe.capacity(config).total_params == sum(p.numel() for p in hf_model.parameters())

    ids = hf_ids(config.vocab_size, batch=2, seq_len=24)
    with torch.no_grad():
        reference = hf_model(ids, output_router_logits=True)
    ours = moe.routing(trace(loaded.model, ids, capture=moe.ROUTER_CAPTURES))  # (L, B·T, ·), batch pooled
    assert_close(ours.logits, torch.stack(reference.router_logits).float(), rtol=1e-4, atol=1e-5)
    # transformers pools every layer and counts each of the k choices as a token: k × our loss, pooled
    pooled = moe.load_balancing_loss(ours.logits, ours.expert_ids)
    assert_close(reference.aux_loss.float(), config.top_k * pooled, rtol=1e-5, atol=1e-6)
    assert all(1.0 <= e <= 4.0 for e in ours.effective_experts.tolist())


# ---- the balanced-vs-unbalanced comparison in words -------------------------------------------------
def test_top2_that_barely_collapses_is_said_to_barely_collapse():
    text = moe.balance_finding(2, 4, [3.958, 3.977, 3.923, 3.919], [3.96, 3.994, 3.983, 3.981])
    assert "barely collapses" in text and "3.94 effective experts of 4" in text and "3.98 with it" in text
    assert "0.04" in text and "layer (3)" in text


def test_top1_that_collapses_is_said_to_collapse_with_its_worst_layer():
    text = moe.balance_finding(1, 4, [3.856, 2.813, 2.153, 3.176], [3.897, 3.985, 3.999, 3.988])
    assert "**collapses**" in text and "3.00 effective experts" in text and "layer 2 only 2.15" in text
    assert "barely" not in text


def test_a_router_more_even_without_the_loss_is_not_called_collapsed():
    text = moe.balance_finding(2, 8, [7.9, 7.9], [6.0, 6.5])
    assert "more even without" in text and "collapses" not in text
