"""Tiny, seeded, randomly initialized transformers models of Qwen3, OLMo 2, SmolLM3 and Phi-1/2, built
offline from ``AutoConfig.for_model(model_type, ...)`` in float32 with eager attention (so transformers
returns its attention maps), every parameter redrawn as in tests/helpers/tiny_hf.py.

The variants are the options that change the math: Qwen3 with a window on some layers only, with
biases and tied embeddings; OLMo 2 with GQA and with biases; SmolLM3 with its default mix of RoPE and
NoPE layers, a mix of its own, and windows on its NoPE layers; Phi with partial rotary (0.5 and Phi-2's
0.4), QK LayerNorm, GQA, full rotary and exact GELU.
"""

from __future__ import annotations

import torch

from tests.helpers.tiny_hf import WINDOW, randomize_, save

DIMS = dict(vocab_size=160, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=0, eos_token_id=0)

# variant → (model_type, config overrides on DIMS)
DENSE_VARIANTS: dict[str, tuple[str, dict]] = {
    "qwen3": ("qwen3", dict(head_dim=16)),
    "qwen3_window_on_layer_1": ("qwen3", dict(head_dim=16, use_sliding_window=True, sliding_window=WINDOW,
                                              max_window_layers=1)),
    "qwen3_biases_tied_head_dim_8": ("qwen3", dict(head_dim=8, attention_bias=True, tie_word_embeddings=True)),
    "olmo2": ("olmo2", dict()),
    "olmo2_mha_biases": ("olmo2", dict(num_key_value_heads=4, attention_bias=True)),
    "smollm3_every_4th_nope": ("smollm3", dict(num_hidden_layers=4)),
    "smollm3_nope_first_and_third": ("smollm3", dict(num_hidden_layers=4, no_rope_layers=[0, 1, 0, 1])),
    "smollm3_windowed_nope": ("smollm3", dict(num_hidden_layers=4, no_rope_layers=[1, 0, 1, 0],
                                              use_sliding_window=True, sliding_window=WINDOW,
                                              tie_word_embeddings=False)),
    "phi_half_rotary": ("phi", dict(num_key_value_heads=4)),
    "phi_qk_layernorm_phi2_rotary": ("phi", dict(num_key_value_heads=4, qk_layernorm=True,
                                                 partial_rotary_factor=0.4)),
    "phi_gqa_full_rotary_gelu": ("phi", dict(partial_rotary_factor=1.0, hidden_act="gelu", qk_layernorm=True)),
}


def dense_config(variant: str):
    """The transformers config of ``variant``, eager attention."""
    from transformers import AutoConfig

    model_type, overrides = DENSE_VARIANTS[variant]
    return AutoConfig.for_model(model_type, **{**DIMS, **overrides}, attn_implementation="eager")


def build_dense(variant: str, seed: int = 0) -> torch.nn.Module:
    """The transformers causal LM of ``variant``: float32, eval mode, every parameter redrawn."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(dense_config(variant)).to(torch.float32)
    return randomize_(model, seed).eval()


def save_with_tokenizer(variant: str, root) -> tuple[torch.nn.Module, object, str]:
    """(the transformers model, its tokenizer, the directory): ``variant`` sized to a real byte-level
    tokenizer (tests/helpers/byte_tokenizer.py), saved with its tokenizer.json under ``root`` as
    ``tiny-<variant>``: a checkpoint the app's pages can feed text."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from tests.helpers.byte_tokenizer import ByteLevelTokenizer

    tokenizer = ByteLevelTokenizer()
    model_type, overrides = DENSE_VARIANTS[variant]
    config = AutoConfig.for_model(model_type, **{**DIMS, **overrides, "vocab_size": tokenizer.vocab_size},
                                  attn_implementation="eager")
    torch.manual_seed(0)
    model = randomize_(AutoModelForCausalLM.from_config(config), 0).eval()
    directory = save(model, root / f"tiny-{variant}")
    tokenizer._tokenizer.save(str(directory / "tokenizer.json"))
    return model, tokenizer, str(directory)
