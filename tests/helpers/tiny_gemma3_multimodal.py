"""A tiny, seeded, random Gemma3ForConditionalGeneration: the Gemma 3 text decoder of tests/helpers/tiny_hf.py
(mixed sliding and full layers, two RoPE bases) beside a one-layer SigLIP vision tower and its projector.
Built offline from config objects, float32, eager attention; every parameter redrawn (tiny_hf.randomize_)."""

from __future__ import annotations

import torch

from tests.helpers.tiny_hf import GEMMA3, GEMMA_BASE, randomize_

VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
              patch_size=14)


def build(seed: int = 0, vocab_size: int = GEMMA_BASE["vocab_size"]) -> torch.nn.Module:
    import transformers

    text = {**GEMMA_BASE, **GEMMA3, "vocab_size": vocab_size}
    config = transformers.AutoConfig.for_model("gemma3", text_config=text, vision_config=VISION,
                                               mm_tokens_per_image=4, attn_implementation="eager")
    torch.manual_seed(seed)
    model = transformers.Gemma3ForConditionalGeneration(config).to(torch.float32)
    return randomize_(model, seed, scale=0.3).eval()
