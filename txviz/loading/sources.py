"""Where models may come from: the default model, the cache, and directories an operator allows.

A shared app must not open arbitrary paths. ``allowed_roots()`` are the cache directory, the lab's
shipped zoo (``assets/zoo``) and the directories in ``TXVIZ_MODEL_DIRS`` (separated by
``os.pathsep``); ``confine(path)`` resolves a user-typed path (following symlinks, collapsing ``..``)
and refuses it unless it lies inside one of them. ``discover()`` lists the loadable models found
there: .gguf files and directories with a config.json.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from txviz.loading.errors import ModelLoadError
from txviz.loading.zoo import SHIPPED_ZOO


def cache_dir() -> Path:
    return Path(os.environ.get("TXVIZ_HOME") or Path.home() / ".cache" / "txviz").expanduser()


def allowed_roots() -> list[Path]:
    roots = [cache_dir(), SHIPPED_ZOO]
    for entry in os.environ.get("TXVIZ_MODEL_DIRS", "").split(os.pathsep):
        if entry.strip():
            roots.append(Path(entry.strip()).expanduser())
    return [root.resolve() for root in roots]


def confine(path: str | Path, roots: list[Path] | None = None) -> Path:
    """The resolved path if it lies inside an allowed root, else ModelLoadError."""
    roots = allowed_roots() if roots is None else [Path(r).resolve() for r in roots]
    text = str(path).strip()
    if not text:
        raise ModelLoadError("empty model path")
    if "\x00" in text:
        raise ModelLoadError("model path contains a NUL character")
    resolved = Path(text).expanduser().resolve()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        listed = ", ".join(str(r) for r in roots)
        raise ModelLoadError(f"{text} is outside the allowed model directories ({listed}); "
                             "add its directory to TXVIZ_MODEL_DIRS to allow it")
    if not resolved.exists():
        raise ModelLoadError(f"no such file or directory: {resolved}")
    return resolved


@dataclass(frozen=True)
class ModelSource:
    label: str  # shown in the picker
    path: str  # what txviz.loading.load() takes


def discover(roots: list[Path] | None = None, *, max_depth: int = 3) -> list[ModelSource]:
    """Loadable models under the roots (not following symlinks out of them)."""
    roots = allowed_roots() if roots is None else [Path(r).resolve() for r in roots]
    found: dict[str, ModelSource] = {}
    for root in roots:
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            depth = len(Path(dirpath).relative_to(root).parts)
            if depth >= max_depth:
                dirnames[:] = []
            here = Path(dirpath)
            if "config.json" in filenames and any(f.endswith(".safetensors") for f in filenames):
                found[str(here)] = ModelSource(f"{here.name} ({here.parent})", str(here))
            for name in filenames:
                if name.endswith(".gguf"):
                    found[str(here / name)] = ModelSource(f"{name} ({here})", str(here / name))
    return sorted(found.values(), key=lambda s: s.label)
