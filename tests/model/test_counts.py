"""Parameter and FLOP counts of a ModelConfig (txviz.model.counts) against a real Decoder of that config."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny import VARIANTS, random_decoder, tiny_config
from txviz.model import Decoder
from txviz.model.counts import count_active_params, count_params, flops_per_token

PARAM_VARIANTS = {
    **VARIANTS,
    "untied_biases": dict(qkv_bias=True, out_bias=True, mlp_bias=True),
    "qkv_bias_only": dict(n_kv_heads=2, qkv_bias=True),
    "tied_rope": dict(tie_embeddings=True),
    "learned_untied": dict(positions="learned", tie_embeddings=False),
    "moe_biases_tied": dict(n_kv_heads=1, n_experts=3, top_k=1, mlp_bias=True, tie_embeddings=True),
    "moe_gelu_biases": dict(n_experts=4, top_k=3, ffn="gelu_mlp", mlp_bias=True, norm="layernorm"),
    "explicit_head_dim": dict(n_kv_heads=2, head_dim=12, out_bias=True),
    "moe_shared_gated_dense_layer": dict(n_layers=3, n_experts=4, top_k=2, expert_hidden=16, shared_expert_hidden=40,
                                         shared_expert_gate=True, dense_layers=(1,)),
    "moe_shared_ungated_biased_router": dict(n_experts=4, top_k=1, shared_expert_hidden=24, router_bias=True,
                                             router_order="topk_softmax", mlp_bias=True),
}
MOE_FLOP_VARIANTS = ("moe_shared_gated_dense_layer", "moe_shared_ungated_biased_router")


def meta_decoder(config) -> Decoder:
    with torch.device("meta"):
        return Decoder(config)


@pytest.mark.parametrize("variant", sorted(PARAM_VARIANTS))
def test_count_params_equals_a_real_decoder(variant):
    config = tiny_config(**PARAM_VARIANTS[variant])
    model = meta_decoder(config)
    assert count_params(config) == sum(p.numel() for p in model.parameters())
    idle_experts = sum(p.numel() for name, p in model.named_parameters()
                       if ".experts." in name and int(name.split(".experts.")[1].split(".")[0]) >= config.top_k)
    assert count_active_params(config) == count_params(config) - idle_experts


def _norm_params(model: Decoder) -> int:
    return sum(p.numel() for name, p in model.named_parameters() if "norm" in name)


@pytest.mark.parametrize("variant", [v for v in sorted(VARIANTS) if v != "learned"])  # "learned" has biases
def test_flops_are_twice_the_weights_a_token_multiplies(variant):
    config = tiny_config(**VARIANTS[variant])
    model = random_decoder(config)
    assert count_params(config) == sum(p.numel() for p in model.parameters())
    lookup = config.vocab_size * config.d_model if not config.tie_embeddings else 0  # read, not multiplied
    positions = config.max_seq_len * config.d_model if config.positions == "learned" else 0
    matmul = count_active_params(config) - lookup - positions - _norm_params(model)
    assert flops_per_token(config, 0) == 2 * matmul


@pytest.mark.parametrize("variant", MOE_FLOP_VARIANTS)
def test_moe_flops_are_twice_the_matrices_a_token_multiplies(variant):
    """The router, the top-k experts and the shared expert with its gate, and a dense layer's FFN: every
    weight matrix a token runs through, counted from the real model's parameters (biases are added)."""
    config = tiny_config(**PARAM_VARIANTS[variant])
    model = meta_decoder(config)
    matrices = 0
    for name, p in model.named_parameters():
        if p.dim() != 2 or name == "embed.weight":
            continue
        expert = name.split(".experts.")[1].split(".")[0] if ".experts." in name else None
        matrices += 0 if expert is not None and int(expert) >= config.top_k else p.numel()
    if config.tie_embeddings:
        matrices += config.vocab_size * config.d_model
    assert flops_per_token(config, 0) == 2 * matrices


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_attention_adds_four_h_d_per_key_and_layer(variant):
    config = tiny_config(**VARIANTS[variant])
    keys = 20 if config.sliding_window is None else config.sliding_window
    extra = flops_per_token(config, 20) - flops_per_token(config, 0)
    assert extra == 4 * config.n_layers * config.n_heads * config.head_dim * keys
