"""What a GGUF file of the Gemma family (llama.cpp archs ``gemma``, ``gemma2``, ``gemma3``) adds to the
common reading: metadata → Gemma's ModelConfig fields, and the post-norms' tensor names (the q/k norms of
Gemma 3 are in the common table, as Qwen3's).

llama.cpp's converter (``convert_hf_to_gguf.py``: ``GemmaModel``, ``Gemma2Model``, ``Gemma3Model``)
writes Gemma differently from llama in three ways that matter here:

* every ``*norm.weight`` is stored as w + 1 (Gemma's RMSNorm multiplies by 1 + w), which is exactly
  the folded weight txviz's plain RMSNorm wants, so norms are used as stored;
* Q and K rows are NOT permuted (Gemma runs llama.cpp's NEOX, rotate-half RoPE), so nothing is undone;
* some hyper-parameters are not in the file at all but fixed in llama.cpp's ``llama-model.cpp`` per
  architecture: which layers slide (Gemma 2: every other, Gemma 3: five of six), Gemma 3's RoPE base on
  sliding layers (10 000). Those defaults are the tables below, read only when the file is silent.
  transformers' GGUF loader takes the same values from its config defaults.

The query scale is left at head_dim**-0.5: llama.cpp uses that for every size but the 27B models
(whose query_pre_attn_scalar is d_model / n_heads, and which no key in the file announces).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from txviz.config import ConfigError, check_bound
from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf.family import ArchKeys, GGUFFamily

GEMMA_LAYER_NAMES = {  # blk.{i}.<key> → layers.{i}.<value>, beyond the common table
    "post_attention_norm.weight": "post_attn_norm.weight",
    "post_ffw_norm.weight": "post_ffn_norm.weight",
}

# llama.cpp's llama-model.cpp, hparams.set_swa_pattern(n): layer i slides unless (i + 1) % n == 0
SLIDING_PATTERN = {"gemma2": 2, "gemma3": 6}
# llama.cpp's rope_freq_base_train_swa for gemma3 (HF: rope_local_base_freq)
LOCAL_ROPE_BASE = {"gemma3": 10_000.0}


def layer_types(architecture: str, n_layers: int, window: int | None, pattern: Any = None) -> tuple[str, ...] | None:
    """Each layer "sliding" or "full". ``pattern`` is the file's ``attention.sliding_window_pattern``
    when it has one: a period n (every n-th layer full) or one bool per layer (True: sliding)."""
    if window is None:
        return None
    try:
        check_bound("n_layers", n_layers)  # before a list of that many entries is built
    except ConfigError as error:
        raise ModelLoadError(str(error)) from None
    if isinstance(pattern, list):
        if len(pattern) != n_layers:
            raise ModelLoadError(f"sliding_window_pattern has {len(pattern)} entries for {n_layers} layers")
        return tuple("sliding" if slides else "full" for slides in pattern)
    period = pattern if isinstance(pattern, int) and not isinstance(pattern, bool) else SLIDING_PATTERN.get(architecture)
    if not period:
        return None  # every layer slides over the window (ModelConfig's default for layer_types None)
    return tuple("full" if (i + 1) % period == 0 else "sliding" for i in range(n_layers))


def gemma_fields(keys: ArchKeys, common: Mapping[str, Any]) -> dict[str, Any]:
    """ModelConfig fields for a Gemma file, given the fields every architecture shares."""
    if common["rope_scaling"].kind != "none":  # llama.cpp scales only the global layers' RoPE on Gemma 3
        raise ModelLoadError(f"{keys.path}: RoPE scaling on a {keys.architecture} file applies to its global layers "
                             "only, which txviz's config cannot express; not supported")
    window = keys.number("attention.sliding_window", int)
    local_base = keys.number("rope.freq_base_swa", float) or LOCAL_ROPE_BASE.get(keys.architecture)
    pattern = keys.raw("attention.sliding_window_pattern")
    return dict(
        ffn="geglu", gelu_approximate="tanh",
        embed_scale=math.sqrt(common["d_model"]),
        sliding_window=window or None,
        layer_types=layer_types(keys.architecture, common["n_layers"], window or None, pattern),
        rope_local_theta=float(local_base) if window and local_base else None,
        sandwich_norm=keys.has_tensor("blk.0.post_attention_norm.weight"),
        attn_softcap=_positive_or_none(keys.number("attn_logit_softcapping", float)),
        final_softcap=_positive_or_none(keys.number("final_logit_softcapping", float)),
    )


def _positive_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


GEMMA = GGUFFamily("gemma", layer_names=GEMMA_LAYER_NAMES, fields=gemma_fields)
GEMMA2 = GGUFFamily("gemma2", layer_names=GEMMA_LAYER_NAMES, fields=gemma_fields)
GEMMA3 = GGUFFamily("gemma3", layer_names=GEMMA_LAYER_NAMES, fields=gemma_fields)
