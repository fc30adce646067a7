"""Mixture-of-Experts checkpoints against transformers itself: tiny random Qwen2-MoE, Qwen3-MoE, OLMoE
and Granite-MoE models saved with ``save_pretrained`` (and in transformers 5's stacked-expert layout),
loaded through txviz, must give the same logits, the same attention map in every layer and head, and the
same routing: per token and MoE layer, the router's logits and probabilities, the experts chosen (in
order) and their gates, and a shared expert's sigmoid gate, as transformers' own modules computed them."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import random_ids, save, save_state_dict
from tests.helpers.published_geometry_configs import QWEN1_5_MOE_A2_7B, QWEN3_30B_A3B
from tests.helpers.tiny_hf_moe import GRANITE_3_0_1B_A400M, OLMOE_1B_7B, VARIANTS, build, hf_routing, meta_parameters
from txviz.analysis.moe.routing import router_captures
from txviz.capture.trace import trace
from txviz.loading.hf.loader import load_hf_dir, read_hf_config
from txviz.model.counts import count_active_params, count_params

pytestmark = NEEDS_TRANSFORMERS

ROUTER_CAPTURES = ("router_logits", "router_probs", "expert_ids", "expert_gates")
FAMILIES = ("qwen2_moe", "qwen3_moe", "olmoe", "granitemoe")
CASES = sorted(name for name, (family, _) in VARIANTS.items() if family in FAMILIES)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def check_against_transformers(hf_model, loaded) -> None:
    ids = random_ids(hf_model.config.vocab_size)
    out, routers, shared = hf_routing(hf_model, ids)
    config = loaded.config
    tr = trace(loaded.model, ids, capture=("logits", "attn_probs"))
    assert_close(tr["attn_probs"], torch.stack(out.attentions))  # (L, B, H, T, S)
    assert_close(tr["logits"], out.logits)
    assert [layer for layer, _ in routers] == list(config.moe_layers)
    for (_, (logits, _, _)), reported in zip(routers, out.router_logits, strict=True):
        assert torch.equal(logits, reported)  # the hooks saw what output_router_logits reports
    routed = trace(loaded.model, ids, capture=router_captures(config), layers=config.moe_layers)
    for slot, (layer, (logits, gates, chosen)) in enumerate(routers):
        flat = {name: routed[name][slot].reshape(-1, routed[name].shape[-1]) for name in ROUTER_CAPTURES}  # (B·T, ·)
        assert_close(flat["router_logits"].float(), logits.float())
        assert_close(flat["router_probs"], torch.softmax(logits.float(), dim=-1))
        assert torch.equal(flat["expert_ids"], chosen), f"layer {layer}: different experts chosen"
        assert_close(flat["expert_gates"], gates)
        if config.shared_expert_gate:  # the shared expert's gate on every token
            assert_close(routed["shared_expert_gate"][slot].reshape(-1), shared[layer])
    assert sorted(shared) == (list(config.moe_layers) if config.shared_expert_gate else [])


@pytest.mark.parametrize("variant", CASES)
def test_logits_maps_and_routing_match_transformers(variant, tmp_path):
    hf_model = build(variant)
    loaded = load_hf_dir(save(hf_model, tmp_path), device="cpu")
    assert loaded.metadata["architecture"] == hf_model.config.architectures[0]
    check_against_transformers(hf_model, loaded)
    assert count_params(loaded.config) == hf_model.num_parameters()
    assert sum(p.numel() for p in loaded.model.parameters()) == hf_model.num_parameters()


@pytest.mark.parametrize("variant", sorted({VARIANTS[name][0] for name in CASES}))
def test_transformers_5_stacked_experts_load_the_same(variant, tmp_path):
    hf_model = build(variant)
    assert any(name.endswith("experts.gate_up_proj") for name in hf_model.state_dict())  # the premise
    loaded = load_hf_dir(save_state_dict(hf_model, tmp_path), device="cpu")
    check_against_transformers(hf_model, loaded)


@pytest.mark.parametrize("raw, active_billions", [
    (QWEN1_5_MOE_A2_7B, 2.7), (QWEN3_30B_A3B, 3.4), (OLMOE_1B_7B, 1.3), (GRANITE_3_0_1B_A400M, 0.43)],
    ids=["qwen1.5-moe-a2.7b", "qwen3-30b-a3b", "olmoe-1b-7b", "granite-3.0-1b-a400m"])
def test_real_sizes_count_as_transformers_builds_them(raw, active_billions):
    """At the published sizes: every parameter counted (shared experts, their gates, dense layers) equals
    transformers' num_parameters(), and the active count is near what the name says (A2.7B, A3B, 1B of 7B,
    A400M)."""
    config = read_hf_config(raw)
    assert count_params(config) == meta_parameters(raw)
    assert round(count_active_params(config) / 1e9, 2 if active_billions < 1 else 1) == active_billions
