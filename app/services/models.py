"""The models a session can look at: a known model by name ("default" is SmolLM2, "gemma3-270m" …, see
txviz.loading.sources.KNOWN_MODELS), or a path confined to the allowed model directories (a zoo or cache
model by its short form, ``zoo:moe_top2``, which a link names); and the catalog the sidebar offers (the
known models, then every model discovered in those directories, a broken file listed with its reason,
never offered)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from txviz.lab.zoo import describe
from txviz.loading import fetch, load, preflight
from txviz.loading.errors import ModelLoadError
from txviz.loading.hub import ensure_hub_model, load_hub_model
from txviz.loading.hub_id import looks_like_hub_id
from txviz.loading.hub_policy import HubPolicy
from txviz.loading.known import load_known_model
from txviz.loading.loaded import LoadedModel
from txviz.loading.sources import (DEFAULT_MODEL_NAME, DEFAULT_SOURCE, KNOWN_MODELS, ModelSource, discover,
                                   known_model, link_name, locate)
from txviz.loading.zoo import is_txviz_dir

Describe = Callable[[str, int], str]  # (a zoo directory, the version of its config.json) -> its one-line description


def is_known(source: str) -> bool:
    return source == DEFAULT_SOURCE or source in KNOWN_MODELS


def load_model(source: str) -> LoadedModel:
    """A known model's name (fetched if needed, loaded from its cached float32 copy), else a path or a
    short form (``zoo:moe_top2``, txviz.loading.sources), confined whatever the URL says, whose header
    passes the discovery check before it is loaded."""
    if is_known(source):
        return load_known_model(known_model(source))
    if looks_like_hub_id(source):
        return load_hub(source)
    path = locate(source)
    reason = preflight.problem(path)  # its header, parsed in a capped child first (kept per file version)
    if reason:
        raise ModelLoadError(reason)
    return load(path)


def hub_policy() -> HubPolicy:
    """The operator's: Hub ids are off in the app unless TXVIZ_HUB allows them."""
    return HubPolicy.from_env(shared=True)


def fetch_hub(hub_id: str, progress: Callable[[float, str], None] | None = None) -> str:
    """Download ``hub_id`` under the operator's policy and limits; its id pinned to the commit (for the URL)."""
    return ensure_hub_model(hub_id, policy=hub_policy(), progress=progress).pinned_id


def load_hub(hub_id: str) -> LoadedModel:
    """A Hub id (as a link names it: the policy holds whatever the URL says), its files' headers checked
    in the capped child as a local file's are, then loaded."""
    snapshot = ensure_hub_model(hub_id, policy=hub_policy())
    reason = preflight.problem(snapshot.path)
    if reason:
        raise ModelLoadError(reason)
    return load_hub_model(snapshot.pinned_id, policy=hub_policy())


def known_options() -> dict[str, str]:
    """label → source of the known models fetched from PyPI (the default first, named "default")."""
    return {(f"{m.display_name} (default)" if m.name == DEFAULT_MODEL_NAME else m.display_name):
            (DEFAULT_SOURCE if m.name == DEFAULT_MODEL_NAME else m.name) for m in KNOWN_MODELS.values()}


def known_files() -> set[Path]:
    """The known models' own .gguf files (fetched into the cache, or TXVIZ_DEFAULT_GGUF), resolved."""
    candidates = [fetch.cached_path(m) for m in KNOWN_MODELS.values()] + [fetch.default_override()]
    known = set()
    for candidate in candidates:
        try:
            if candidate:
                known.add(Path(candidate).resolve())
        except OSError:
            pass
    return known


def is_known_file(path: str, known: set[Path]) -> bool:
    """A known model's own .gguf: listed once, by its name."""
    try:
        return Path(path).resolve() in known
    except OSError:
        return False


def describe_zoo(path: str) -> str:
    """A zoo directory's one-line description (it parses and checks the whole config.json: 13 zoo models
    took ~12 ms of every rerun of every page, so the app keeps it per version of that file)."""
    return describe(Path(path))


def label(source: ModelSource, describe_dir: Describe) -> str:
    """A zoo variant's one-line description (``describe_dir(path, version of its config.json)``), else the
    discovered label."""
    if not is_txviz_dir(source.path):
        return source.label
    config = Path(source.path) / "config.json"
    try:
        return describe_dir(source.path, config.stat().st_mtime_ns)
    except (ModelLoadError, OSError):
        return source.label


def model_options(describe_dir: Describe) -> tuple[dict[str, str], dict[str, str]]:
    """(label → source of the models offered, a zoo or cache model by the short form a link names;
    label → reason of the files found broken). Discovered files are checked by their header in a capped
    child process (txviz.loading.preflight, once per file version): a broken one is listed with its
    reason, never offered for a one-click load."""
    options, broken = known_options(), {}
    known = known_files()
    sources = [source for source in discover() if not is_known_file(source.path, known)]
    verdicts = preflight.problems([source.path for source in sources], wait=False)  # never wait on another session
    for source in sources:
        if verdicts[source.path]:
            broken[source.label] = verdicts[source.path]
        else:
            options.setdefault(label(source, describe_dir), link_name(source.path))  # what the link will name
    return options, broken
