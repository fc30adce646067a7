"""The model a session looks at: a known model by name ("default" is SmolLM2, "gemma3-270m" …, see
txviz.loading.sources.KNOWN_MODELS), or a path confined to the allowed model directories."""

from __future__ import annotations

from txviz.loading import fetch, load, preflight
from txviz.loading.errors import ModelLoadError
from txviz.loading.loaded import LoadedModel
from txviz.loading.sources import DEFAULT_SOURCE, KNOWN_MODELS, confine


def is_known(source: str) -> bool:
    return source == DEFAULT_SOURCE or source in KNOWN_MODELS


def load_model(source: str) -> LoadedModel:
    """A known model's name (fetched if needed, loaded from its cached float32 copy), else a path,
    confined whatever the URL says, whose header passes the discovery check before it is loaded."""
    if is_known(source):
        return fetch.load_known_model(source)
    path = confine(source)
    reason = preflight.problem(path)  # its header, parsed in a capped child first (kept per file version)
    if reason:
        raise ModelLoadError(reason)
    return load(path)


