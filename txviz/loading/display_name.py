"""The name a person knows a loaded model by, for the app's sidebar and ``txviz info``: a known model's own
name when it is that model's fetched file (GGUF ``general.name`` fields are often training-run labels:
SmolLM2's reads "Smollm2 135M 8k Lc100K Mix1 Ep2"), a Hub model's repo and short commit, else the file or
directory name, else the config's."""

from __future__ import annotations

from pathlib import Path

from txviz.loading import fetch
from txviz.loading.loaded import LoadedModel
from txviz.loading.sources import KNOWN_MODELS


def display_name(loaded: LoadedModel) -> str:
    source = Path(loaded.source)
    for model in KNOWN_MODELS.values():
        if source == fetch.cached_path(model):
            return model.display_name
    hub = loaded.metadata.get("hub")
    if hub:  # the repo and its commit, shortened as the download's messages write it (the URL keeps it whole)
        return f"{hub['repo']}@{hub['commit'][:12]}"
    return source.name or loaded.config.name
