"""Where models may come from: the default model, the cache, and directories an operator allows.

A shared app must not open arbitrary paths. ``allowed_roots()`` are the cache directory, the lab's
shipped zoo (``assets/zoo``) and the directories in ``TXVIZ_MODEL_DIRS`` (separated by
``os.pathsep``); ``confine(path)`` resolves a user-typed path (following symlinks, collapsing ``..``)
and refuses it unless it lies inside one of them, and, for a directory, unless every entry in it
(config, weights, tokenizer) resolves inside one too: a symlink cannot lead a loader out.
``discover()`` lists the loadable models found there: .gguf files and directories with a config.json.
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
    try:
        resolved = Path(text).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long, ~user that does not exist
        raise ModelLoadError(f"cannot resolve the model path {text[:200]!r}: {exc}") from None
    if not _within(resolved, roots):
        listed = ", ".join(str(r) for r in roots)
        raise ModelLoadError(f"{text[:200]} is outside the allowed model directories ({listed}); "
                             "add its directory to TXVIZ_MODEL_DIRS to allow it")
    try:
        if not resolved.exists():
            raise ModelLoadError(f"no such file or directory: {str(resolved)[:300]}")
        if resolved.is_dir():  # the files a loader opens there (config, weights, tokenizer) must not link out
            for entry in resolved.iterdir():
                if not _within(entry.resolve(), roots):
                    raise ModelLoadError(f"{entry} links outside the allowed model directories")
    except OSError as exc:  # a name too long for the OS, no permission
        raise ModelLoadError(f"cannot use the model path {text[:200]!r}: {exc.strerror or exc}") from None
    return resolved


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


@dataclass(frozen=True)
class ModelSource:
    label: str  # shown in the picker
    path: str  # what txviz.loading.load() takes


def _inside(path: Path, root: Path) -> bool:
    try:
        return _within(path.resolve(), [root])
    except (OSError, RuntimeError):  # a symlink loop
        return False


def discover(roots: list[Path] | None = None, *, max_depth: int = 3) -> list[ModelSource]:
    """Loadable models under the roots (not following symlinks out of them: a linked file or
    directory whose target lies outside its root is not listed, as ``confine`` would refuse it)."""
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
            if "config.json" in filenames and any(f.endswith(".safetensors") for f in filenames) \
                    and all(_inside(here / f, root) for f in filenames if f == "config.json" or f.endswith(".safetensors")):
                found[str(here)] = ModelSource(f"{here.name} ({here.parent})", str(here))
            for name in filenames:
                if name.endswith(".gguf") and _inside(here / name, root):
                    found[str(here / name)] = ModelSource(f"{name} ({here})", str(here / name))
    return sorted(found.values(), key=lambda s: s.label)
