"""The real (pretrained) models this machine has fetched, by display name, with their configs read from
the GGUF header alone (no weights loaded): what pages that put SmolLM2 and Gemma 3 side by side need."""

from __future__ import annotations

from txviz.config import ModelConfig
from txviz.loading.fetch import cached_path, is_fetched
from txviz.loading.gguf.loader import read_gguf_config
from txviz.loading.sources import KNOWN_MODELS


def fetched_configs() -> dict[str, ModelConfig]:
    """Display name → config of every known model whose .gguf is in the cache, in KNOWN_MODELS' order."""
    return {model.display_name: read_gguf_config(cached_path(model))
            for model in KNOWN_MODELS.values() if is_fetched(model)}


def missing_names() -> list[str]:
    """Known models not fetched yet, as ``txviz fetch --model`` takes them."""
    return [model.name for model in KNOWN_MODELS.values() if not is_fetched(model)]
