"""Qwen3 (Qwen Team 2025): Llama with QK-norm, an RMSNorm over each head's q and k before RoPE (as
Gemma 3's), biases on all four attention projections when ``attention_bias`` is set, and Qwen2's rule
for sliding windows: with ``use_sliding_window``, layers from ``max_window_layers`` on slide (or as
``layer_types`` says)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.hf.families.layers import bounded_range, layer_kinds

ARCHITECTURE = "Qwen3ForCausalLM"
# Qwen3Config's defaults (over Llama's) for the keys a config may leave out
DEFAULTS = {"max_position_embeddings": 32768, "head_dim": 128, "use_sliding_window": False, "sliding_window": 4096,
            "max_window_layers": 28}


def qwen3_config(raw: dict, hf: SimpleNamespace) -> dict[str, Any]:
    raw = {**hf.llama_defaults, **DEFAULTS, **raw}
    fields = hf.llama_fields({**raw, "mlp_bias": False})  # Qwen3's MLP has no biases whatever the config says
    window = raw.get("sliding_window") if hf.flag(raw, "use_sliding_window") else None
    first = hf.count(raw, "max_window_layers", 0)
    sliding = [window is not None and i >= first for i in bounded_range(hf, fields["n_layers"])]
    return {**fields, "qk_norm": True, **layer_kinds(hf, raw, fields["n_layers"], window, sliding)}
