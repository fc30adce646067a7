"""Gemma 3's multimodal checkpoints (``model_type`` "gemma3", Gemma3ForConditionalGeneration): the text
decoder only.

The 4B, 12B and 27B Gemma 3 models ship as one checkpoint with a SigLIP vision tower, a projector that
turns image patches into soft tokens, and the same text decoder as the 1B and 270M ``gemma3_text``
models (Team Gemma 2025). Its settings sit in ``text_config`` (the fields it leaves out take
Gemma3TextConfig's defaults) and its weights under a language-model prefix: ``language_model.model.``
in published checkpoints and in transformers' save_pretrained, ``model.language_model.`` in
transformers 5's modules. On a text-only prompt transformers' conditional model runs exactly that
decoder, so txviz.loading.hf.config reads ``text_config`` as a ``gemma3_text`` config.json; the vision
tower's and projector's tensors are skipped by name before any of their bytes are read
(``SKIPPED_PREFIXES``).
"""

from __future__ import annotations

from typing import Any

from txviz.loading.errors import ModelLoadError

ARCHITECTURE = "Gemma3ForConditionalGeneration"
SKIPPED_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.")
TEXT_PREFIXES = {"language_model.model.": "model.", "model.language_model.": "model.",
                 "language_model.lm_head.": "lm_head."}
# Gemma3TextConfig's defaults for the sizes the published 4B config's text_config leaves out (its other
# fields' defaults are read with every gemma3_text config: txviz.loading.hf.config.GEMMA3_DEFAULTS)
TEXT_DEFAULTS = {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                 "num_attention_heads": 8, "num_key_value_heads": 4}
NOTE = ("Only the text decoder is loaded: this multimodal Gemma 3 checkpoint's vision tower and projector "
        "({skipped} tensors) were skipped unread, so prompts are text only.")


def text_config(raw: dict) -> dict[str, Any]:
    """The nested ``text_config`` as a ``gemma3_text`` config.json would say it."""
    text = raw.get("text_config")
    if text is None:
        text = {}  # every field then takes Gemma3TextConfig's default, as transformers does
    if not isinstance(text, dict):
        raise ModelLoadError(f"config.json: text_config must be an object, got {str(text)[:80]!r}")
    kind = text.get("model_type", "gemma3_text")
    if kind != "gemma3_text":
        raise ModelLoadError(f"config.json: a gemma3 checkpoint's text_config must be gemma3_text, got {kind!r}")
    return {**TEXT_DEFAULTS, **text, "model_type": "gemma3_text"}


def text_decoder_names(tensors: dict, config) -> dict:
    """The language model's tensors under the names of a ``gemma3_text`` checkpoint; any other tensor (one
    the skipped prefixes missed) is left for the name table to refuse."""
    out = {}
    for name, tensor in tensors.items():
        prefix = next((p for p in TEXT_PREFIXES if name.startswith(p)), None)
        out[name if prefix is None else TEXT_PREFIXES[prefix] + name[len(prefix):]] = tensor
    return out
