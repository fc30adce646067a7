"""Load a Hugging Face checkpoint directory: config.json + safetensors weights (+ tokenizer.json).

    loaded = load_hf_dir("models/SmolLM2-135M")     # LoadedModel, format "hf"
    config = read_hf_config("uploaded/config.json")   # ModelConfig only, no weights needed

Supported: Llama, Mistral, Qwen2, Mixtral, GPT-2, Gemma 1/2/3 (text), BLOOM, MPT, GPT-NeoX and Phi-3
causal LMs, Qwen3, OLMo 2, SmolLM3, Phi-1/1.5/2, Qwen2-MoE, Qwen3-MoE, OLMoE and Granite-MoE
(hf/families/), and the text decoder of multimodal Gemma 3 checkpoints (hf_config.SUPPORTED).
The steps are
plain: config.json → ModelConfig (hf/config.py); the tensors of ``model.safetensors`` or of every
shard that ``model.safetensors.index.json`` lists; small named transforms and a name table
(hf/names.py); ``Decoder.from_state_dict``. Pickled weights (.bin, .pt, …) are never opened, since
unpickling can run arbitrary code. tokenizer.json is optional, with BOS/EOS and the chat template
from tokenizer_config.json (or chat_template.jinja).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from txviz.loading.device import default_device
from txviz.loading.errors import ModelLoadError, TokenizerError
from txviz.loading.json_files import read_json_object
from txviz.loading.hf.config import (MAX_CONFIG_BYTES, SUPPORTED, config_from_dict, model_type_of, parse_config_json,
                                     quantization_refusal, read_hf_config)
from txviz.loading.hf.families import mxfp4
from txviz.loading.hf.names import SKIPPED_PARTS, to_txviz_names
from txviz.loading.loaded import LoadedModel
from txviz.model import Decoder

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
MAX_SIDE_FILE_BYTES = 64 << 20  # index and tokenizer_config files are KiB to a few MiB

__all__ = ["load_hf_dir", "read_hf_config"]


# ---- weights ------------------------------------------------------------------------------------
def _read_json(path: Path) -> dict:
    return read_json_object(path, MAX_SIDE_FILE_BYTES)


def _shards(directory: Path) -> list[Path]:
    """The files ``model.safetensors.index.json`` maps tensors to; each must sit in the directory."""
    weight_map = _read_json(directory / INDEX_FILE).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelLoadError(f"{directory / INDEX_FILE} has no weight_map")
    names = sorted({str(f) for f in weight_map.values()})
    for name in names:
        if Path(name).name != name or not name.endswith(".safetensors"):
            raise ModelLoadError(f"{INDEX_FILE} names {name!r}: shards must be .safetensors files beside it")
        if not (directory / name).is_file():
            raise ModelLoadError(f"{INDEX_FILE} lists {name}, which is missing from {directory}")
    return [directory / name for name in names]


def checkpoint_files(directory: Path) -> list[Path]:
    """The safetensors files holding the weights, or ModelLoadError saying what was found instead."""
    if (directory / INDEX_FILE).is_file():
        return _shards(directory)
    if (directory / SINGLE_FILE).is_file():
        return [directory / SINGLE_FILE]
    present = sorted(p.name for p in directory.iterdir() if p.is_file())
    other_safetensors = [n for n in present if n.endswith(".safetensors")]
    pickles = [n for n in present if n.endswith(PICKLE_SUFFIXES)]
    if other_safetensors:
        raise ModelLoadError(f"{directory} has {other_safetensors[:3]} but neither {SINGLE_FILE} nor "
                             f"{INDEX_FILE} saying which files hold the weights")
    if pickles:
        raise ModelLoadError(f"{directory} holds only pickled weights ({', '.join(pickles[:3])}); txviz "
                             "loads only safetensors, because unpickling can run arbitrary code. Convert "
                             "them, e.g. with transformers' save_pretrained(..., safe_serialization=True)")
    raise ModelLoadError(f"{directory} has no weights: expected {SINGLE_FILE} or {INDEX_FILE}")


def _read_shard(path: Path, skipped: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The file's tensors whose names start with none of ``skipped``: a skipped tensor's bytes are never
    read, only its name in the header."""
    if not skipped:
        return load_file(path, device="cpu")
    with safe_open(path, framework="pt", device="cpu") as handle:
        return {name: handle.get_tensor(name) for name in handle.keys() if not name.startswith(skipped)}


def read_tensors(files: list[Path], device: torch.device, dtype: torch.dtype,
                 skipped: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """Every tensor of every file not under a ``skipped`` prefix, moved to ``device``/``dtype`` one shard at
    a time."""
    tensors: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            shard = _read_shard(path, skipped)
        except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
            raise ModelLoadError(f"{path} is not a readable safetensors file: {exc}") from exc
        repeated = sorted(set(shard) & set(tensors))
        if repeated:
            raise ModelLoadError(f"{path.name} repeats tensors of an earlier shard, e.g. {repeated[:3]}")
        for name in list(shard):
            tensor = shard.pop(name)
            tensors[name] = tensor.to(device=device, dtype=dtype) if tensor.is_floating_point() else tensor
    return tensors


def count_skipped(files: list[Path], skipped: tuple[str, ...]) -> int:
    """How many tensors of ``files`` lie under a ``skipped`` prefix (their headers only)."""
    if not skipped:
        return 0
    total = 0
    for path in files:
        with safe_open(path, framework="pt", device="cpu") as handle:
            total += sum(name.startswith(skipped) for name in handle.keys())
    return total


# ---- tokenizer ----------------------------------------------------------------------------------
def _token_text(value) -> str | None:
    """tokenizer_config.json writes special tokens as a string or as an AddedToken object."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _chat_template(directory: Path, tokenizer_config: dict) -> str | None:
    """A string; a list of named templates (the "default" one is used); or chat_template.jinja."""
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if template is None and (directory / "chat_template.jinja").is_file():
        template = (directory / "chat_template.jinja").read_text(encoding="utf-8")
    return template if isinstance(template, str) else None


def read_tokenizer(directory: Path):
    """(Tokenizer or None, what it was built from). None when there is no tokenizer.json."""
    from txviz.loading.tokenizer.tokenizer import Tokenizer

    if not (directory / "tokenizer.json").is_file():
        return None, {}
    config_path = directory / "tokenizer_config.json"
    tokenizer_config = _read_json(config_path) if config_path.is_file() else {}
    special = dict(bos_token=_token_text(tokenizer_config.get("bos_token")),
                   eos_token=_token_text(tokenizer_config.get("eos_token")),
                   chat_template=_chat_template(directory, tokenizer_config))
    try:
        return Tokenizer.from_file(directory / "tokenizer.json", **special), special
    except TokenizerError as exc:
        raise ModelLoadError(f"{directory / 'tokenizer.json'}: {exc}") from exc


# ---- the whole directory ------------------------------------------------------------------------
def _read_directory_config(directory: Path, max_config_bytes: int) -> tuple[dict, str]:
    """(config.json as a dict, its family) for a directory that can be loaded, else ModelLoadError."""
    if not directory.is_dir():
        raise ModelLoadError(f"{directory} is not a directory: expected a Hugging Face checkpoint "
                             "directory with config.json and safetensors weights")
    if not (directory / "config.json").is_file():
        raise ModelLoadError(f"{directory} has no config.json: expected a Hugging Face checkpoint directory")
    raw, _ = parse_config_json(directory / "config.json", max_bytes=max_config_bytes)
    kind = model_type_of(raw)
    refusal = quantization_refusal(raw, str(directory))
    if refusal:
        raise ModelLoadError(refusal)
    return raw, kind


def load_hf_dir(path: str | os.PathLike, *, device: str | torch.device | None = None,
                dtype: torch.dtype = torch.float32, max_config_bytes: int = MAX_CONFIG_BYTES) -> LoadedModel:
    """Load a checkpoint directory onto ``device`` (None: CUDA if available, else CPU) in ``dtype``; a
    config.json over ``max_config_bytes`` is refused unread."""
    directory = Path(path).expanduser()
    raw, kind = _read_directory_config(directory, max_config_bytes)
    device = torch.device(device) if device is not None else default_device()
    config = config_from_dict(raw, name=directory.name, source=str(directory))
    files = checkpoint_files(directory)
    skipped, note = SKIPPED_PARTS.get(kind, ((), ""))
    tensors, transforms = to_txviz_names(kind, read_tensors(files, device, dtype, skipped), config)
    try:
        model = Decoder.from_state_dict(config, tensors, device=device, dtype=dtype)
    except ValueError as exc:
        raise ModelLoadError(f"{directory}: the weights do not match config.json: {exc}") from exc
    tokenizer, special = read_tokenizer(directory)
    metadata = {"architecture": SUPPORTED[kind], "model_type": kind, "files": [f.name for f in files],
                "transforms": transforms, "checkpoint_dtype": raw.get("torch_dtype") or raw.get("dtype"),
                **special, "hf_config": raw}
    if skipped:  # said where the model is shown (the sidebar's weights note)
        metadata["weights_note"] = note.format(skipped=count_skipped(files, skipped))
    if (raw.get("quantization_config") or {}).get("quant_method") == mxfp4.QUANT_METHOD:
        metadata["weights_note"] = mxfp4.NOTE
    return LoadedModel(model=model, tokenizer=tokenizer, config=config, source=str(directory),
                       format="hf", metadata=metadata)
