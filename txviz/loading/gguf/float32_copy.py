"""The float32 copy of a GGUF, kept in ``txviz_home()`` so later loads skip the slow part.

Loading a GGUF costs ~5 s on two cores: parsing 98k tokenizer strings (~2.3 s in ``gguf``'s reader),
dequantizing Q4_1/Q8_0 blocks (~2 s). So after the first load the float32 weights are written to a
safetensors file beside it, together with the GGUF's header (metadata key/values and tensor types) as
JSON in the safetensors metadata; later loads read that one file and rebuild config and tokenizer from
the header with the same code as the cold path. The copy is named after its GGUF and keyed by that
file's path, size and mtime and a format version, and ignored when any of them differs. It also carries
the sha256 of its weights, verified the first time a process reads that version of the copy (~0.7 s on
SmolLM2's 540 MB): a copy whose bytes changed on disk (a flipped bit would give NaN logits) is deleted with
a warning and rebuilt from the GGUF.
"""

from __future__ import annotations

import hashlib
import os
import uuid
import warnings
from dataclasses import replace
from pathlib import Path

import torch

from txviz.loading.gguf.loader import (GGUFHeader, assemble, config_from_header, dequantized_state_dict,
                                       header_from_reader, open_gguf)
from txviz.loading.home import disk_is_full, txviz_home
from txviz.loading.loaded import LoadedModel
from txviz.loading.progress import Progress, report_to

CACHE_FORMAT = "2"  # bump when the dequantized copy's layout or the loader's transforms change (2: a checksum)


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
        report_to(progress, 0.5, "building the model from cached float32 weights")
        header, state = cached
        loaded = assemble(header, state, device=device, dtype=dtype, weights_from=str(dequantized_copy_path(gguf_path)))
        report_to(progress, 1.0, "model ready")
        return loaded
    report_to(progress, 0.0, f"reading and dequantizing {Path(gguf_path).name}")
    reader = open_gguf(gguf_path)
    header = header_from_reader(reader, gguf_path)
    state = dequantized_state_dict(reader, config_from_header(header))
    report_to(progress, 0.6, "building the model")
    loaded = assemble(header, state, device=device, dtype=dtype)
    report_to(progress, 0.8, "keeping a float32 copy for faster loads")  # only of a model that builds
    try:
        write_dequantized_copy(gguf_path, header, state)
    except CopyNotKept as failure:  # said on stderr and beside the model (the app's sidebar shows it)
        warnings.warn(str(failure), stacklevel=2)
        loaded = replace(loaded, metadata={**loaded.metadata, "weights_note": failure.note})
    report_to(progress, 1.0, "model ready")
    return loaded
