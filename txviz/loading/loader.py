"""``load(source)``: the one entry that picks a loader from what ``source`` is — a known model's name, a
.gguf file, a Hugging Face checkpoint directory, a lab directory or a Hub id — and returns its LoadedModel.
Only GGUF and safetensors are read; nothing is ever unpickled."""

from __future__ import annotations

from pathlib import Path

import torch

from txviz.loading.device import resolve_device
from txviz.loading.errors import ModelLoadError
from txviz.loading.loaded import LoadedModel

DEFAULT_MODEL = "default"


def load(source: str | Path | None = None, *, device: str | torch.device | None = None,
         dtype: torch.dtype = torch.float32) -> LoadedModel:
    """Load ``source``: None or "default" (SmolLM2-135M-Instruct), a known model's name ("gemma3-270m";
    txviz.loading.sources.KNOWN_MODELS, fetched on first use), a .gguf file, a directory with config.json
    + safetensors (Hugging Face), a txviz lab directory, or a Hub id ``org/name[@revision]`` (downloaded
    through huggingface_hub into its cache: txviz.loading.hub). A path wins over a name it shadows."""
    device = resolve_device(device)
    try:
        return _load(source, device, dtype)
    except (ValueError, FileNotFoundError):  # ModelLoadError, ConfigError, TokenizerError: ours, with a message
        raise
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as error:  # noqa: BLE001 - one boundary: a file's fault is a ModelLoadError, whatever
        # the library under it raised (ZeroDivisionError, OverflowError, MemoryError, a Rust PanicException)
        message = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
        raise ModelLoadError(f"{source}: could not be loaded ({type(error).__name__}: {message})") from error


def _load(source, device: torch.device, dtype: torch.dtype) -> LoadedModel:
    from txviz.loading.sources import KNOWN_MODELS

    if source is None or str(source) == DEFAULT_MODEL:
        from txviz.loading.known import load_default_model
        return load_default_model(device=device, dtype=dtype)
    if str(source) in KNOWN_MODELS and not Path(source).exists():
        from txviz.loading.known import load_known_model
        return load_known_model(KNOWN_MODELS[str(source)], device=device, dtype=dtype)
    from txviz.loading.hub_id import looks_like_hub_id
    if looks_like_hub_id(str(source)):
        from txviz.loading.hub import load_hub_model
        return load_hub_model(str(source), device=device, dtype=dtype)
    path = Path(source).expanduser()
    if not path.exists():
        raise ModelLoadError(f"no such file or directory: {path}")
    if path.is_file() and path.suffix.lower() == ".gguf":
        from txviz.loading.gguf.loader import load_gguf
        return load_gguf(path, device=device, dtype=dtype)
    if path.is_dir():
        from txviz.loading.zoo import is_txviz_dir, load_zoo_model
        if is_txviz_dir(path):
            return load_zoo_model(path, device=device, dtype=dtype)
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"{path} has no config.json: expected a Hugging Face checkpoint directory "
                                 "(config.json + *.safetensors) or a .gguf file")
        from txviz.limits import current
        from txviz.loading.hf.loader import load_hf_dir
        return load_hf_dir(path, device=device, dtype=dtype, max_config_bytes=current().max_config_bytes)
    raise ModelLoadError(f"cannot load {path}: give a .gguf file or a directory with config.json and "
                         "safetensors weights (pickled .bin/.pt files are never loaded)")


__all__ = ["DEFAULT_MODEL", "load"]
