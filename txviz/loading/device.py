"""Where a model runs: the default device (CUDA if there is one) and a user's device name checked against
this machine, so a bad ``--device`` is one clear ModelLoadError instead of torch's own crash."""

from __future__ import annotations

import torch

from txviz.loading.errors import ModelLoadError


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a torch.device (None: CUDA if available, else CPU); a name torch does not know, or
    a device this machine lacks, is a ModelLoadError saying so rather than torch's own crash."""
    if device is None:
        return default_device()
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ModelLoadError(f"unknown device {device!r}: use cpu, cuda or cuda:N") from exc
    available = {"cpu": True, "cuda": torch.cuda.is_available(),
                 "mps": getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()}
    if not available.get(resolved.type, False):
        raise ModelLoadError(f"device {str(resolved)!r} is not available here; available: "
                             + ", ".join(kind for kind, ok in available.items() if ok))
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise ModelLoadError(f"device {str(resolved)!r} does not exist: {torch.cuda.device_count()} CUDA device(s)")
    return resolved
