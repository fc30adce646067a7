"""Load a GGUF file (llama.cpp's model format) into a txviz Decoder, its config and its tokenizer.

GGUF (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) is one file: typed key/values
("llama.block_count", "tokenizer.ggml.tokens", …) then tensors, most of them block-quantized. This
loader is a few small tables and one transform, read with the ``gguf`` package (no code execution,
nothing unpickled):

* metadata keys → ``ModelConfig`` (``config_from_header``): the keys every architecture shares, then
  what its ``GGUFFamily`` adds (``txviz.loading.gguf.families``: llama, qwen2, qwen3, qwen2moe, qwen3moe,
  olmoe, phi3, gemma, gemma2, gemma3, one small module each);
* GGUF tensor names → txviz parameter names (``txviz.loading.gguf.names``), every tensor dequantized to
  float32 by ``gguf.quants``' block code (``dequantize_array``), fused ones split by rows;
* ``unpermute_rope_rows`` (``txviz.loading.gguf.llama``) for the architectures llama.cpp permutes.

Llama 3.x's ``rope_freqs`` (per-pair RoPE divisors) is read into the config as Llama 3's rope scaling
(``txviz.loading.gguf.rope_freqs``). Anything the tables do not know (another architecture, an extra
tensor such as LongRoPE's ``rope_factors_long``, a quantization type gguf cannot dequantize) is refused
with a ``ModelLoadError``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from txviz.config import ConfigError, ModelConfig, RopeScaling
from txviz.loading.device import default_device
from txviz.loading.errors import ModelLoadError, TokenizerError
from txviz.loading.gguf.families import SUPPORTED_ARCHITECTURES, family_of
from txviz.loading.gguf.family import ArchKeys, GGUFFamily
from txviz.loading.gguf.fields import tokenizer_field_problem
from txviz.loading.gguf.llama import unpermute_rope_rows
from txviz.loading.gguf.names import txviz_names
from txviz.loading.gguf.rope_freqs import ROPE_FREQS, llama3_scaling, read_rope_freqs, refuse_longrope
from txviz.loading.loaded import LoadedModel
from txviz.loading.tokenizer.tokenizer import Tokenizer

__all__ = ["SUPPORTED_ARCHITECTURES", "unpermute_rope_rows", "txviz_names", "load_gguf", "read_gguf_config"]


# ---- the header: metadata and tensor types ------------------------------------------------------
@dataclass(frozen=True)
class GGUFHeader:
    """Everything in a GGUF file except the tensor data: key/values and each tensor's type."""

    path: str
    metadata: Mapping[str, Any]  # key → plain Python value (str, int, float, bool, list)
    tensor_types: Mapping[str, str]  # tensor name → quantization type ("Q4_1", "F32", …)
    # the values of rope_freqs.weight, the one tensor read into the config; None where the file has none or
    # only its header was read (the discovery check sizes the model without them)
    rope_freqs: tuple[float, ...] | None = None

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_key(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}", default)

    def to_json(self) -> str:
        return json.dumps({"path": self.path, "metadata": dict(self.metadata),
                           "tensor_types": dict(self.tensor_types), "rope_freqs": self.rope_freqs})

    @classmethod
    def from_json(cls, text: str) -> "GGUFHeader":
        data = json.loads(text)
        rope_freqs = data.get("rope_freqs")
        return cls(path=data["path"], metadata=data["metadata"], tensor_types=data["tensor_types"],
                   rope_freqs=tuple(rope_freqs) if rope_freqs is not None else None)


def open_gguf(path: str | Path):
    """A ``gguf.GGUFReader`` over the file (its fast-array variant), or a ModelLoadError saying why the
    file is unusable."""
    from txviz.loading.gguf.reader import FastGGUFReader as GGUFReader

    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"no GGUF file at {path}")
    try:
        reader = GGUFReader(path)
    except Exception as exc:  # the reader fails with ValueError/IndexError/struct errors deep inside numpy
        raise ModelLoadError(f"{path} is not a readable GGUF file (truncated or corrupt?): "
                             f"{type(exc).__name__}: {exc}") from exc
    for tensor in reader.tensors:
        if tensor.data.nbytes != tensor.n_bytes:
            raise ModelLoadError(f"{path}: tensor {tensor.name} is cut short "
                                 f"({tensor.data.nbytes} of {tensor.n_bytes} bytes): the file is truncated")
    return reader


def header_from_reader(reader, path: str | Path) -> GGUFHeader:
    metadata = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):  # the file's own bookkeeping (version, counts)
            continue
        try:
            metadata[key] = field.contents()
        except Exception as exc:
            raise ModelLoadError(f"{path}: metadata key {key!r} is unreadable: {exc}") from exc
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    return GGUFHeader(path=str(path), metadata=metadata, tensor_types=types,
                      rope_freqs=read_rope_freqs(reader, dequantize_tensor, str(path)))


def read_gguf_header(path: str | Path) -> GGUFHeader:
    return header_from_reader(open_gguf(path), path)


# ---- metadata → ModelConfig ---------------------------------------------------------------------
def _number(h: GGUFHeader, key: str, kind: type = int, default: Any = None) -> Any:
    return ArchKeys(h).number(key, kind, default)


def _rope_scaling(h: GGUFHeader) -> RopeScaling:
    kind = h.arch_key("rope.scaling.type", "none")
    factor = _number(h, "rope.scaling.factor", float, 1.0) or 1.0
    if kind == "none" and _number(h, "rope.scale_linear", float):  # older files: a bare linear factor
        kind, factor = "linear", _number(h, "rope.scale_linear", float)
    if kind == "none" or (kind == "linear" and factor == 1.0):
        return RopeScaling()
    original = _number(h, "rope.scaling.original_context_length")
    if kind == "linear":
        return RopeScaling(kind="linear", factor=factor)
    if kind == "yarn":
        return RopeScaling(kind="yarn", factor=factor, original_max_seq_len=original,
                           beta_fast=_number(h, "rope.scaling.yarn_beta_fast", float, 32.0),
                           beta_slow=_number(h, "rope.scaling.yarn_beta_slow", float, 1.0))
    raise ModelLoadError(f"{h.path}: RoPE scaling type {str(kind)[:60]!r} is not supported (linear, yarn)")


def _checked_rope_scaling(h: GGUFHeader) -> RopeScaling:
    try:
        return _rope_scaling(h)
    except ConfigError as exc:  # RopeScaling checks its own numbers: say which file they came from
        raise ModelLoadError(f"{h.path}: the metadata does not describe a valid model: {exc}") from exc


def _required(h: GGUFHeader, key: str) -> int:
    value = _number(h, key)
    if value is None:
        raise ModelLoadError(f"{h.path}: metadata key '{h.architecture}.{key}' is missing")
    return value


def config_from_header(h: GGUFHeader) -> ModelConfig:
    """The ModelConfig a header describes: the keys every architecture shares, then its family's own."""
    family = family_of(h.architecture, h.path)
    refuse_longrope(h.tensor_types, h.path)
    d_model, n_heads = _required(h, "embedding_length"), _required(h, "attention.head_count")
    head_dim = _number(h, "attention.key_length", int, 0) or d_model // max(n_heads, 1)
    problem = tokenizer_field_problem(h.metadata)
    if problem:  # before a string's length is taken for the vocabulary size
        raise ModelLoadError(f"{h.path}: the tokenizer metadata is unusable: {problem}")
    tokens = h.metadata.get("tokenizer.ggml.tokens")
    vocab = _number(h, "vocab_size") or (len(tokens) if isinstance(tokens, list) else None)
    n_experts = _number(h, "expert_count", int, 0)
    ffn_key = "expert_feed_forward_length" if n_experts and _number(h, "expert_feed_forward_length") else \
        "feed_forward_length"
    fields = dict(
        vocab_size=int(vocab) if vocab else 0, d_model=d_model, n_layers=_required(h, "block_count"),
        n_heads=n_heads, n_kv_heads=_number(h, "attention.head_count_kv", int, n_heads), head_dim=head_dim,
        ffn_hidden=_required(h, ffn_key), norm="rmsnorm", ffn="swiglu",
        norm_eps=_number(h, "attention.layer_norm_rms_epsilon", float, 1e-5),
        n_experts=n_experts, top_k=_number(h, "expert_used_count", int, 2) if n_experts else 2,
        router_norm="topk", positions="rope", rope_theta=_number(h, "rope.freq_base", float, 10000.0),
        rope_scaling=_checked_rope_scaling(h), max_seq_len=_required(h, "context_length"),
        rotary_dims=_rotary_dims(h, family, head_dim),
        tie_embeddings="output.weight" not in h.tensor_types,
        qkv_bias="blk.0.attn_q.bias" in h.tensor_types,
        qk_norm="blk.0.attn_q_norm.weight" in h.tensor_types,
        name=str(h.metadata.get("general.name") or Path(h.path).stem), source=h.path,
    )
    fields.update(family.fields(ArchKeys(h), fields))
    if h.rope_freqs is not None:
        fields["rope_scaling"] = _scaling_from_rope_freqs(h, fields)
    try:
        return ModelConfig(**fields)
    except ConfigError as exc:
        raise ModelLoadError(f"{h.path}: the metadata does not describe a valid model: {exc}") from exc


def _scaling_from_rope_freqs(h: GGUFHeader, fields: Mapping[str, Any]) -> RopeScaling:
    """Llama 3's rope scaling as the file's per-pair divisors describe it; a file that also names a scaling
    in its metadata describes two and is refused."""
    if fields["rope_scaling"].kind != "none":
        raise ModelLoadError(f"{h.path}: the file has both {ROPE_FREQS} and RoPE scaling "
                             f"'{fields['rope_scaling'].kind}' in its metadata; only one can apply")
    rope_dims = fields["rotary_dims"] or fields["head_dim"]
    return llama3_scaling(h.rope_freqs, rope_dims, fields["rope_theta"],
                          _number(h, "rope.scaling.original_context_length"), h.path)


def _rotary_dims(h: GGUFHeader, family: GGUFFamily, head_dim: int) -> int | None:
    """None (RoPE on the whole head) or the leading dimensions RoPE turns, where the family allows fewer."""
    value_dim = _number(h, "attention.value_length", int, head_dim)
    rotary_dims = _number(h, "rope.dimension_count", int, head_dim)
    if value_dim != head_dim:
        raise ModelLoadError(f"{h.path}: key/value sizes {head_dim}/{value_dim} differ; only equal key and value "
                             "sizes are supported")
    if rotary_dims == head_dim:
        return None
    if not family.partial_rotary:
        raise ModelLoadError(f"{h.path}: RoPE on {rotary_dims} of {head_dim} dimensions per head is not "
                             f"supported for {h.architecture} files (only full-width RoPE)")
    return rotary_dims


def read_gguf_config(path: str | Path) -> ModelConfig:
    """The ModelConfig of a GGUF file, without dequantizing anything."""
    return config_from_header(read_gguf_header(path))


def tokenizer_from_header(h: GGUFHeader) -> Tokenizer | None:
    if "tokenizer.ggml.tokens" not in h.metadata:
        return None
    problem = tokenizer_field_problem(h.metadata)
    if problem:
        raise ModelLoadError(f"{h.path}: the tokenizer metadata is unusable: {problem}")
    try:
        return Tokenizer.from_gguf_metadata(h.metadata)
    except TokenizerError as exc:
        raise ModelLoadError(f"{h.path}: {exc}") from exc
    except Exception as exc:  # wrongly typed fields; the Rust BPE raises a bare Exception on bad merges
        raise ModelLoadError(f"{h.path}: the tokenizer metadata is unusable: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from exc


# ---- tensors → state dict -----------------------------------------------------------------------
def dequantize_tensor(tensor) -> torch.Tensor:
    """One GGUF tensor as float32, in PyTorch's (rows, columns) order (GGUF lists dims reversed)."""
    try:
        values = dequantize_array(tensor.data, tensor.tensor_type)
    except NotImplementedError as exc:
        raise ModelLoadError(f"tensor {tensor.name}: quantization type {tensor.tensor_type.name} cannot be "
                             "dequantized by the gguf package") from exc
    shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
    if np.may_share_memory(values, tensor.data):  # F32 is a view into the read-only file mapping
        values = values.copy()
    return torch.from_numpy(np.asarray(values, dtype=np.float32).reshape(shape))


DEQUANTIZE_CHUNK_VALUES = 1 << 16  # float32 values per call of the package's block code (256 KB)


def dequantize_array(data: np.ndarray, qtype) -> np.ndarray:
    """``gguf.quants.dequantize(data, qtype)``, the same values to the bit, in about half its time.

    The package calls its block code on 16 rows at a time, through the file's memmap (numpy's Python-level
    hooks on every slice), and keeps every result until one final concatenate: Gemma 3's 671 MB embedding
    held twice. Every GGML quantization type decodes each block (32 or 256 values) on its own, so the same
    block code runs here on runs of whole blocks (~64k values) of a plain view of the bytes, each written
    straight into the output. Types of one value per block (F32, F16, BF16) go to the package as they are."""
    from gguf import GGML_QUANT_SIZES
    from gguf.quants import dequantize, quant_shape_from_byte_shape

    block, type_size = GGML_QUANT_SIZES.get(qtype, (1, 1))
    if block == 1:  # also an unknown type: the package raises NotImplementedError for it
        return dequantize(data, qtype)
    shape = quant_shape_from_byte_shape(data.shape, qtype)  # the package's own check of the row length
    blocks = data.view(np.ndarray).reshape(-1, type_size)  # (n_blocks, type_size) bytes
    out = np.empty((len(blocks), block), dtype=np.float32)
    step = max(1, DEQUANTIZE_CHUNK_VALUES // block)
    for start in range(0, len(blocks), step):
        run = blocks[start:start + step]
        out[start:start + len(run)] = dequantize(run.reshape(1, -1), qtype).reshape(-1, block)  # one row of blocks
    return out.reshape(shape)


def _unpermute_if_rope(name: str, weight: torch.Tensor, config: ModelConfig, permuted: bool) -> torch.Tensor:
    if not permuted:
        return weight
    if ".attn.q_proj." in name:
        return unpermute_rope_rows(weight, config.n_heads)
    if ".attn.k_proj." in name:
        return unpermute_rope_rows(weight, config.n_kv_heads)
    return weight


def _architecture_of(reader) -> str:
    field = reader.fields.get("general.architecture")
    return str(field.contents()) if field is not None else ""


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's shape in the Decoder ``config`` describes (built on the meta device: no memory)."""
    from txviz.model import Decoder

    with torch.device("meta"):
        return {name: tuple(p.shape) for name, p in Decoder(config).state_dict().items()}


def check_tensor_shapes(reader, config: ModelConfig, family: GGUFFamily) -> dict[str, tuple[int, ...]]:
    """Every tensor's shape against the decoder ``config`` describes, before anything is dequantized:
    a file whose metadata and tensors disagree is refused naming the tensor, not after seconds of work.
    Returns the decoder's shapes (what fused tensors are split into)."""
    check_sizes(reader, config, family)  # before building even an empty skeleton of the model the metadata describes
    expected = expected_shapes(config)
    for tensor in reader.tensors:
        target = txviz_names(tensor.name, config, family)
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        if target is None:
            continue  # refused by name in dequantized_state_dict
        if "config" in target:  # RoPE's per-pair divisors: one per rotated pair
            name, want = tensor.name, (config.rope_dims // 2,)
        elif "expert_param" in target:
            name = f"layers.{target['layer']}.ffn.experts.0.{target['expert_param']}"
            want = (config.n_experts, *expected.get(name, shape[1:]))
        elif "parts" in target:
            name, want = " + ".join(target["parts"]), _fused_shape(target["parts"], expected, shape)
        else:
            name, want = target["name"], expected.get(target["name"], shape)
        if shape != want and not _row_stored_as_vector(shape, want):
            raise ModelLoadError(f"tensor {tensor.name} has shape {shape}, but the metadata describes "
                                 f"{want} for {name}")
    return expected


def _row_stored_as_vector(shape: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """llama.cpp stores a (1, n) matrix, such as Qwen-MoE's shared-expert gate, as a vector of n values."""
    return len(want) == 2 and want[0] == 1 and shape == want[1:]


def _fused_shape(parts: tuple[str, ...], expected: Mapping[str, tuple[int, ...]], shape) -> tuple[int, ...]:
    """The shape of ``parts`` stacked by rows (each part's shape where the decoder has it)."""
    shapes = [expected.get(part) for part in parts]
    if any(s is None for s in shapes) or len({s[1:] for s in shapes}) != 1:
        return shape  # a part the decoder lacks is refused with its name when the state dict is built
    return (sum(s[0] for s in shapes), *shapes[0][1:])


def check_sizes(reader, config: ModelConfig, family: GGUFFamily) -> None:
    """The metadata's numbers against what the file holds, in arithmetic only: a 126 KB file claiming
    10⁹ layers, 10⁶ experts or a head 2²⁸ wide is refused here, before any module or RoPE table exists.
    Every layer 0…L−1 must have tensors, and the config cannot imply many times the parameters the file
    holds (a near miss, one tensor of the wrong shape, is named by ``check_tensor_shapes``)."""
    from txviz.model.counts import count_params

    if config.n_layers > len(reader.tensors):
        raise ModelLoadError(f"the metadata says {config.n_layers:,} layers, but the file holds only "
                             f"{len(reader.tensors):,} tensors")
    layers = {int(m.group(1)) for t in reader.tensors if (m := re.match(r"blk\.(\d+)\.", t.name))}
    if layers != set(range(config.n_layers)):
        missing = sorted(set(range(config.n_layers)) - layers)[:5]
        raise ModelLoadError(f"the metadata says {config.n_layers} layers, but the file's tensors are of layers "
                             f"{sorted(layers)[:5]}…{sorted(layers)[-1:]} (missing {missing})")
    held = sum(int(t.n_elements) for t in reader.tensors if txviz_names(t.name, config, family) is not None)
    described = count_params(config)
    if described > 4 * held:  # far beyond the weights: hostile; a near miss is named tensor by tensor next
        raise ModelLoadError(f"the metadata describes a model of {described:,} parameters, but the file's "
                             f"tensors hold {held:,}: its sizes (layers, widths, heads, experts, vocabulary) "
                             "do not match its weights")


def dequantized_state_dict(reader, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Every tensor of the file, dequantized to float32 on the CPU, under txviz's parameter names; fused
    tensors split by rows, Q/K rows un-permuted only for the architectures llama.cpp permutes."""
    architecture = _architecture_of(reader)
    family = family_of(architecture)
    expected = check_tensor_shapes(reader, config, family)
    state: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        target = txviz_names(tensor.name, config, family)
        if target is None:
            raise ModelLoadError(f"tensor {tensor.name} ({tensor.tensor_type.name}) has no place in a "
                                 f"{config.n_layers}-layer {architecture} decoder; this GGUF variant "
                                 "is not supported")
        if "config" in target:  # already read into the config (the header's rope_freqs)
            continue
        weight = dequantize_tensor(tensor)
        if "expert_param" in target:  # (E, out, in): one slice per expert
            for e in range(weight.shape[0]):
                # a copy, not a view: serializers refuse tensors that share storage
                state[f"layers.{target['layer']}.ffn.experts.{e}.{target['expert_param']}"] = weight[e].clone()
        elif "parts" in target:  # (sum of the parts' rows, in): each part its own rows, a copy
            rows = [expected[part][0] for part in target["parts"]]
            state.update((part, piece.clone()) for part, piece in zip(target["parts"], weight.split(rows)))
        else:
            weight = _unpermute_if_rope(target["name"], weight, config, family.permuted)
            state[target["name"]] = weight.reshape(expected.get(target["name"], weight.shape))  # a row kept as a vector
    return state


# ---- the public entry points --------------------------------------------------------------------
def assemble(header: GGUFHeader, state_dict: Mapping[str, torch.Tensor], *, device=None,
             dtype: torch.dtype = torch.float32, weights_from: str | None = None) -> LoadedModel:
    """A LoadedModel from a header and already-dequantized weights (the file's own or a cached copy)."""
    from txviz.model import Decoder

    config = config_from_header(header)
    try:
        model = Decoder.from_state_dict(config, dict(state_dict), device=device or default_device(), dtype=dtype)
    except ValueError as exc:
        raise ModelLoadError(f"{header.path}: {exc}") from exc
    metadata = {
        "architecture": header.architecture,
        "name": config.name,
        "tensor_types": _count(header.tensor_types.values()),
        "file_type": header.metadata.get("general.file_type"),
        "tokenizer_pre": header.metadata.get("tokenizer.ggml.pre"),
        "chat_template": header.metadata.get("tokenizer.chat_template"),
        "weights_from": weights_from or header.path,
    }
    return LoadedModel(model=model, tokenizer=tokenizer_from_header(header), config=config,
                       source=header.path, format="gguf", metadata=metadata)


def _count(values) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def load_gguf(path: str | Path, *, device: torch.device | str | None = None,
              dtype: torch.dtype = torch.float32) -> LoadedModel:
    """Read, dequantize and un-permute a GGUF file. ``device`` None: CUDA if available, else CPU."""
    reader = open_gguf(path)
    header = header_from_reader(reader, path)
    state = dequantized_state_dict(reader, config_from_header(header))
    return assemble(header, state, device=device, dtype=dtype)
