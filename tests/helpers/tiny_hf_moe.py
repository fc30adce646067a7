"""Tiny, seeded, randomly initialised transformers models of the Mixture-of-Experts families txviz loads
(Qwen2-MoE, Qwen3-MoE, OLMoE, Granite-MoE), built offline with ``AutoConfig.for_model`` in float32 with
eager attention; and what their routers decide, read from transformers' own router modules.

Every parameter is redrawn (tests/helpers/tiny_hf.randomize_), so no norm hides behind 1 and no router
behind 0. transformers is imported when a model is built, never when this module is imported.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from tests.helpers.tiny_hf import randomize_

BASE = dict(vocab_size=160, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, pad_token_id=0,
            bos_token_id=0, eos_token_id=0)
_QWEN2 = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=40, shared_expert_intermediate_size=56)
_QWEN3 = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=40, head_dim=16)
_GRANITE = dict(num_local_experts=4, num_experts_per_tok=2)

# variant → (model_type, config overrides): each family's router choices, and dense layers mixed in
VARIANTS: dict[str, tuple[str, dict]] = {
    "qwen2_moe": ("qwen2_moe", _QWEN2),
    "qwen2_moe_norm_topk": ("qwen2_moe", dict(_QWEN2, norm_topk_prob=True)),
    "qwen2_moe_sparse_step_2": ("qwen2_moe", dict(_QWEN2, decoder_sparse_step=2)),  # layers 0 and 2 dense
    "qwen2_moe_mlp_only_top1": ("qwen2_moe", dict(_QWEN2, mlp_only_layers=[1], num_experts_per_tok=1)),
    "qwen3_moe": ("qwen3_moe", _QWEN3),
    "qwen3_moe_norm_topk_mlp_only": ("qwen3_moe", dict(_QWEN3, norm_topk_prob=True, mlp_only_layers=[0])),
    "qwen3_moe_attention_bias_top3": ("qwen3_moe", dict(_QWEN3, attention_bias=True, num_experts_per_tok=3)),
    "olmoe": ("olmoe", dict(num_experts=4, num_experts_per_tok=2)),
    "olmoe_norm_topk_mha": ("olmoe", dict(num_experts=5, num_experts_per_tok=2, norm_topk_prob=True,
                                          num_key_value_heads=4)),
    "granitemoe": ("granitemoe", _GRANITE),
    "granitemoe_multipliers": ("granitemoe", dict(_GRANITE, embedding_multiplier=3.0, attention_multiplier=0.3,
                                                  residual_multiplier=0.6, logits_scaling=2.5)),
    "granitemoe_tied_top1": ("granitemoe", dict(_GRANITE, num_experts_per_tok=1, tie_word_embeddings=True)),
}


def variants_of(*families: str) -> list[str]:
    return sorted(name for name, (family, _) in VARIANTS.items() if family in families)


def build(variant: str, seed: int = 0, scale: float = 0.15, **changes) -> torch.nn.Module:
    """The transformers model of ``variant`` (its settings with ``changes``): float32, eager attention, eval
    mode, every parameter redrawn."""
    from transformers import AutoConfig, AutoModelForCausalLM

    family, overrides = VARIANTS[variant]
    config = AutoConfig.for_model(family, **{**BASE, **overrides, **changes}, attn_implementation="eager")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).to(torch.float32)
    return randomize_(model, seed, scale).eval()


def hf_routing(model: torch.nn.Module, ids: torch.Tensor) -> tuple[object, list[tuple[int, tuple]], dict]:
    """(output, [(layer, (router logits (N, E), gates (N, K), chosen (N, K))) for each MoE layer],
    {layer: shared expert's gate σ(x·w) (N,)}): one forward of transformers' model with its attention maps
    and router logits (``output_router_logits``), its routers' own outputs (choices and gates too) and its
    shared experts' gate logits caught by forward hooks."""
    caught: list[tuple[int, tuple]] = []
    shared: dict[int, torch.Tensor] = {}
    hooks = []
    for name, module in model.named_modules():
        layer = int(name.split(".layers.")[1].split(".")[0]) if ".layers." in name else None
        if type(module).__name__.endswith("TopKRouter"):
            hooks.append(module.register_forward_hook(
                lambda _m, _args, out, layer=layer: caught.append((layer, tuple(t.detach() for t in out)))))
        elif name.endswith("mlp.shared_expert_gate"):
            hooks.append(module.register_forward_hook(
                lambda _m, _args, out, layer=layer: shared.update({layer: torch.sigmoid(out.detach())[:, 0]})))
    try:
        with torch.no_grad():
            out = model(ids, output_attentions=True, output_router_logits=True, use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    return out, caught, shared


def save_checkpoint(variant: str, directory: Path, tokenizer: Path, **changes) -> Path:
    """``variant`` saved by transformers' save_pretrained with ``tokenizer`` (a tokenizer.json) beside it:
    a checkpoint folder the app can open."""
    build(variant, **changes).save_pretrained(directory, safe_serialization=True)
    shutil.copy(tokenizer, directory / "tokenizer.json")
    return directory


# Real sizes, read by txviz and built by transformers on the meta device (no weights): the numbers of
# allenai/OLMoE-1B-7B-0924's and ibm-granite/granite-3.0-1b-a400m-base's config.json (their model names
# say 1B of 7B and 400M active: the counts agree); Qwen's two are in published_geometry_configs.py.
OLMOE_1B_7B = {
    "architectures": ["OlmoeForCausalLM"], "attention_bias": False, "clip_qkv": None, "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 1024, "max_position_embeddings": 4096, "model_type": "olmoe",
    "norm_topk_prob": False, "num_attention_heads": 16, "num_experts": 64, "num_experts_per_tok": 8,
    "num_hidden_layers": 16, "num_key_value_heads": 16, "pad_token_id": 1, "eos_token_id": 50279,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False, "vocab_size": 50304}
GRANITE_3_0_1B_A400M = {
    "architectures": ["GraniteMoeForCausalLM"], "attention_bias": False, "hidden_act": "silu", "hidden_size": 1024,
    "intermediate_size": 512, "max_position_embeddings": 4096, "model_type": "granitemoe",
    "num_attention_heads": 16, "num_key_value_heads": 8, "num_hidden_layers": 24, "num_local_experts": 32,
    "num_experts_per_tok": 8, "vocab_size": 49155, "embedding_multiplier": 12.0, "attention_multiplier": 0.015625,
    "residual_multiplier": 0.22, "logits_scaling": 6.0, "tie_word_embeddings": True, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}


def meta_parameters(raw: dict) -> int:
    """transformers' num_parameters() of the model a config.json describes, built on the meta device."""
    from transformers import AutoConfig, AutoModelForCausalLM

    settings = {k: v for k, v in raw.items() if k not in ("architectures", "model_type", "torch_dtype")}
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(AutoConfig.for_model(raw["model_type"], **settings)).num_parameters()
