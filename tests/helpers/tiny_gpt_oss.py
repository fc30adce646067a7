"""Tiny, seeded, random gpt-oss models (GptOssForCausalLM), built offline from config objects: float32,
eager attention, every parameter redrawn (tiny_hf.randomize_: sinks, router and expert biases included,
which transformers initializes to zero or near it).

GptOssConfig's default RoPE is YaRN stretching 4096 tokens 32-fold, sized for its 131072-token context;
here it stretches 16 tokens 4-fold within a 64-token context, with betas that put the ramp between
extrapolated and interpolated pairs inside a 16-wide head at ends that are not whole pairs (0.16 and 1.56),
so rounding them (``truncate``) changes the frequencies. Layers alternate a sliding window of 8 and full attention;
a 24-token prompt is three windows long."""

from __future__ import annotations

import torch

from tests.helpers.tiny_hf import randomize_

WINDOW, SEQ_LEN = 8, 24
YARN = {"rope_type": "yarn", "factor": 4.0, "beta_fast": 2.0, "beta_slow": 0.25, "truncate": False,
        "original_max_position_embeddings": 16, "rope_theta": 150000.0}
BASE = dict(vocab_size=160, hidden_size=64, intermediate_size=32, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW,
            max_position_embeddings=64, rope_parameters=YARN)
VARIANTS = {
    "gpt_oss": {},
    # the clamps bite (|gate|, |up| > 0.5 for many units), a full layer first, truncated YaRN, MQA, top-1
    "gpt_oss_clamped": dict(swiglu_limit=0.5, swiglu_alpha=1.2, num_key_value_heads=1, num_experts_per_tok=1,
                            layer_types=["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
                            rope_parameters={**YARN, "truncate": True}),
}


def build(variant: str = "gpt_oss", seed: int = 0, vocab_size: int | None = None) -> torch.nn.Module:
    import transformers

    settings = {**BASE, **VARIANTS[variant], **({} if vocab_size is None else {"vocab_size": vocab_size})}
    config = transformers.AutoConfig.for_model("gpt_oss", **settings, attn_implementation="eager")
    torch.manual_seed(seed)
    model = transformers.GptOssForCausalLM(config).to(torch.float32)
    return randomize_(model, seed, scale=0.3).eval()
