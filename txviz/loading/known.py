"""The known models (txviz.loading.sources.KNOWN_MODELS) as LoadedModels: fetched on first use
(txviz.loading.fetch), then loaded from the cached float32 copy of their GGUF
(txviz.loading.gguf.float32_copy)."""

from __future__ import annotations

import torch

from txviz.loading import fetch
from txviz.loading.device import resolve_device
from txviz.loading.gguf.float32_copy import load_gguf_cached
from txviz.loading.loaded import LoadedModel
from txviz.loading.progress import Progress, scaled
from txviz.loading.sources import DEFAULT_MODEL_NAME, KNOWN_MODELS, KnownModel


def load_known_model(model: KnownModel, device=None, dtype: torch.dtype = torch.float32,
                     progress: Progress | None = None) -> LoadedModel:
    """A known model as a LoadedModel: fetched if needed (progress 0–0.5), then loaded (0.5–1)."""
    path = fetch.ensure(model, scaled(progress, 0.0, 0.5))
    return load_gguf_cached(path, device=resolve_device(device), dtype=dtype, progress=scaled(progress, 0.5, 0.5))


def load_default_model(device=None, dtype: torch.dtype = torch.float32,
                       progress: Progress | None = None) -> LoadedModel:
    """SmolLM2-135M-Instruct as a LoadedModel: fetched if needed (progress 0–0.5), then loaded (0.5–1)."""
    return load_known_model(KNOWN_MODELS[DEFAULT_MODEL_NAME], device=device, dtype=dtype, progress=progress)
