"""The model a session looks at: the default one, or a path confined to the allowed model directories."""

from __future__ import annotations

from pathlib import Path

from txviz.loading import load
from txviz.loading.loaded import LoadedModel
from txviz.loading.sources import confine


def load_model(source: str) -> LoadedModel:
    """``"default"`` is the default model; anything else a path, confined whatever the URL says."""
    return load(None if source == "default" else confine(source))


def display_name(loaded: LoadedModel) -> str:
    """The file or directory name: GGUF ``general.name`` fields are often training-run labels."""
    return Path(loaded.source).name or loaded.config.name
