"""Load a model the lab trained (txviz.lab): a directory with config.json, model.safetensors and
tokenizer.json.

    loaded = load_zoo_model("assets/zoo/mqa")      # LoadedModel, format "txviz"

config.json is ``ModelConfig.to_dict()`` plus the marker ``"txviz_format": 1``, which is what tells
such a directory from a Hugging Face checkpoint (whose config.json has ``model_type`` instead). The
weights use the Decoder's own parameter names, so no name table or transform is involved. The
tokenizer is the lab's word-level tokenizer; ``<|endoftext|>`` opens every training story and is the
model's BOS, EOS and sink token. eval.json and curves.json, when present, are summarized in the
metadata.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from txviz.config import ConfigError, ModelConfig
from txviz.loading.errors import ModelLoadError, TokenizerError
from txviz.loading.json_files import read_json_object
from txviz.loading.loaded import LoadedModel

FORMAT_KEY, FORMAT_VERSION = "txviz_format", 1
CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE = "config.json", "model.safetensors", "tokenizer.json"
EVAL_FILE, CURVES_FILE = "eval.json", "curves.json"
DOCUMENT_TOKEN = "<|endoftext|>"
SHIPPED_ZOO = Path(__file__).resolve().parents[2] / "assets" / "zoo"
MAX_JSON_BYTES = 16 << 20

__all__ = ["SHIPPED_ZOO", "config_json", "is_txviz_dir", "load_zoo_model", "read_txviz_config",
           "txviz_config_from_dict"]


def config_json(config: ModelConfig) -> str:
    """What the lab writes as config.json: the ModelConfig with the format marker first."""
    return json.dumps({FORMAT_KEY: FORMAT_VERSION, **config.to_dict()}, indent=2)


def _read_json(path: Path) -> dict:
    return read_json_object(path, MAX_JSON_BYTES)


def is_txviz_dir(path: str | os.PathLike) -> bool:
    """True for a directory whose config.json carries the txviz marker."""
    config = Path(path) / CONFIG_FILE
    if not config.is_file():
        return False
    try:
        return FORMAT_KEY in _read_json(config)
    except ModelLoadError:
        return False


def read_txviz_config(directory: Path) -> ModelConfig:
    return txviz_config_from_dict(_read_json(directory / CONFIG_FILE), directory / CONFIG_FILE)


def txviz_config_from_dict(raw: dict, origin: str | os.PathLike) -> ModelConfig:
    """The ModelConfig of a parsed lab config.json (marker included), or ModelLoadError naming ``origin``."""
    raw = dict(raw)
    version = raw.pop(FORMAT_KEY, None)
    if version != FORMAT_VERSION:
        raise ModelLoadError(f"{origin}: txviz format {version!r} is not supported "
                             f"(this txviz reads {FORMAT_VERSION})")
    try:
        return ModelConfig.from_dict(raw)
    except (ConfigError, TypeError) as exc:
        raise ModelLoadError(f"{origin}: {exc}") from exc


def _metadata(directory: Path) -> dict:
    metadata: dict = {"files": sorted(p.name for p in directory.iterdir() if p.is_file())}
    if (directory / EVAL_FILE).is_file():
        metadata["eval"] = _read_json(directory / EVAL_FILE)
    if (directory / CURVES_FILE).is_file():
        curves = _read_json(directory / CURVES_FILE)
        metadata["training"] = {k: v for k, v in curves.items() if k not in ("loss", "aux_loss", "lr")}
    return metadata


def load_zoo_model(path: str | os.PathLike, *, device: str | torch.device | None = None,
                   dtype: torch.dtype = torch.float32) -> LoadedModel:
    """Load a lab directory onto ``device`` (None: CUDA if available, else CPU) in ``dtype``."""
    from txviz.loading.device import default_device
    from txviz.loading.hf.loader import read_tensors
    from txviz.loading.tokenizer.tokenizer import Tokenizer
    from txviz.model import Decoder

    directory = Path(path).expanduser()
    config = read_txviz_config(directory)
    if not (directory / WEIGHTS_FILE).is_file():
        raise ModelLoadError(f"{directory} has no {WEIGHTS_FILE}")
    device = torch.device(device) if device is not None else default_device()
    tensors = read_tensors([directory / WEIGHTS_FILE], device, dtype)
    try:
        model = Decoder.from_state_dict(config, tensors, device=device, dtype=dtype)
    except ValueError as exc:
        raise ModelLoadError(f"{directory}: the weights do not match config.json: {exc}") from exc
    tokenizer = None
    if (directory / TOKENIZER_FILE).is_file():
        try:
            tokenizer = Tokenizer.from_file(directory / TOKENIZER_FILE, bos_token=DOCUMENT_TOKEN,
                                            eos_token=DOCUMENT_TOKEN, sink_token=DOCUMENT_TOKEN)
        except TokenizerError as exc:
            raise ModelLoadError(f"{directory / TOKENIZER_FILE}: {exc}") from exc
    return LoadedModel(model=model, tokenizer=tokenizer, config=config, source=str(directory),
                       format="txviz", metadata=_metadata(directory))
