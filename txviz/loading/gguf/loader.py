"""Load a GGUF file (llama.cpp's model format) into a txviz Decoder, its config and its tokenizer.

GGUF (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) is one file: typed key/values
("llama.block_count", "tokenizer.ggml.tokens", …) then tensors, most of them block-quantized. This
loader is three small tables and one transform, read with the ``gguf`` package (no code execution,
nothing unpickled):

* metadata keys → ``ModelConfig`` (``config_from_header``);
* GGUF tensor names → txviz parameter names (``LAYER_NAMES``, ``GLOBAL_NAMES``, ``EXPERT_NAMES``),
  every tensor dequantized to float32 by ``gguf.quants``' block code (``dequantize_array``);
* ``unpermute_rope_rows`` (llama arch only): llama.cpp's converter (``convert_hf_to_gguf.py``, ``LlamaModel.permute``)
  reorders the rows of each Q and K head so that RoPE can rotate *adjacent* pairs; txviz, like the
  HuggingFace reference, rotates pairs (i, i + D/2). The rows are put back — transformers'
  ``reverse_permute_weights`` does the same — or every attention map would be silently wrong.

The Gemma family (``gemma``, ``gemma2``, ``gemma3``) adds its own fields and tensor names from
``txviz.loading.gguf.gemma``; its files are not permuted and store norm weights already as 1 + w.

Anything the tables do not know (another architecture, an extra tensor such as llama 3.1's
``rope_freqs``, a quantization type gguf cannot dequantize) is refused with a ``ModelLoadError``.
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
from txviz.loading.gguf.fields import tokenizer_field_problem
from txviz.loading.gguf.gemma import GEMMA_ARCHITECTURES, GEMMA_LAYER_NAMES, gemma_fields, is_gemma
from txviz.loading.loaded import LoadedModel
from txviz.loading.tokenizer.tokenizer import Tokenizer

# llama.cpp also writes Mistral and Mixtral as "llama"
SUPPORTED_ARCHITECTURES = ("llama", *GEMMA_ARCHITECTURES)
PERMUTED_ARCHITECTURES = ("llama",)  # whose Q/K rows llama.cpp's converter reorders for adjacent-pair RoPE

GLOBAL_NAMES = {
    "token_embd.weight": "embed.weight",
    "output_norm.weight": "final_norm.weight",
    "output.weight": "lm_head.weight",
}
LAYER_NAMES = {  # blk.{i}.<key> → layers.{i}.<value>
    "attn_norm.weight": "attn_norm.weight",
    "attn_q.weight": "attn.q_proj.weight",
    "attn_k.weight": "attn.k_proj.weight",
    "attn_v.weight": "attn.v_proj.weight",
    "attn_q.bias": "attn.q_proj.bias",
    "attn_k.bias": "attn.k_proj.bias",
    "attn_v.bias": "attn.v_proj.bias",
    "attn_output.weight": "attn.o_proj.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "ffn.gate_proj.weight",
    "ffn_up.weight": "ffn.up_proj.weight",
    "ffn_down.weight": "ffn.down_proj.weight",
    "ffn_gate_inp.weight": "ffn.router.weight",
    **GEMMA_LAYER_NAMES,
}
EXPERT_NAMES = {  # blk.{i}.<key> of shape (E, out, in) → layers.{i}.ffn.experts.{e}.<value>
    "ffn_gate_exps.weight": "gate_proj.weight",
    "ffn_up_exps.weight": "up_proj.weight",
    "ffn_down_exps.weight": "down_proj.weight",
}
LAYER_TENSOR = re.compile(r"blk\.(\d+)\.(.+)")


# ---- the named transform -----------------------------------------------------------------------
def unpermute_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation, head by head.

    llama.cpp writes, per head, rows (0, D/2, 1, D/2+1, …) so that rows 2j, 2j+1 form a RoPE pair; the
    reference layout has the pair at rows (j, j + D/2). Works on weights (rows, in) and biases (rows,).
    Use ``n_heads`` for q and ``n_kv_heads`` for k.
    """
    rows = weight.shape[0]
    if rows % (2 * n_heads):
        raise ModelLoadError(f"cannot unpermute {rows} rows into {n_heads} heads of RoPE pairs")
    pairs = rows // n_heads // 2
    # (H, D/2, 2, …): stored as pair j's two members side by side; swap to (H, 2, D/2, …): halves
    return weight.reshape(n_heads, pairs, 2, *weight.shape[1:]).transpose(1, 2).reshape(weight.shape)


# ---- the header: metadata and tensor types ------------------------------------------------------
@dataclass(frozen=True)
class GGUFHeader:
    """Everything in a GGUF file except the tensor data: key/values and each tensor's type."""

    path: str
    metadata: Mapping[str, Any]  # key → plain Python value (str, int, float, bool, list)
    tensor_types: Mapping[str, str]  # tensor name → quantization type ("Q4_1", "F32", …)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_key(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}", default)

    def to_json(self) -> str:
        return json.dumps({"path": self.path, "metadata": dict(self.metadata),
                           "tensor_types": dict(self.tensor_types)})

    @classmethod
    def from_json(cls, text: str) -> "GGUFHeader":
        data = json.loads(text)
        return cls(path=data["path"], metadata=data["metadata"], tensor_types=data["tensor_types"])


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
    return GGUFHeader(path=str(path), metadata=metadata, tensor_types=types)


def read_gguf_header(path: str | Path) -> GGUFHeader:
    return header_from_reader(open_gguf(path), path)


# ---- metadata → ModelConfig ---------------------------------------------------------------------
def _number(h: GGUFHeader, key: str, kind: type = int, default: Any = None) -> Any:
    """An ``<arch>.<key>`` number as ``kind`` (or ``default`` when absent); a string, list or
    fractional count where a number belongs is a ModelLoadError naming the key."""
    value = h.arch_key(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (kind is int and isinstance(value, float) and not value.is_integer()):
        raise ModelLoadError(f"{h.path}: metadata key '{h.architecture}.{key}' must be "
                             f"{'an integer' if kind is int else 'a number'}, got {str(value)[:60]!r}")
    return kind(value)


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
    if h.architecture not in SUPPORTED_ARCHITECTURES:
        raise ModelLoadError(f"{h.path}: GGUF architecture {h.architecture!r} is not supported; "
                             f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    d_model, n_heads = _required(h, "embedding_length"), _required(h, "attention.head_count")
    head_dim = _number(h, "attention.key_length", int, 0) or d_model // max(n_heads, 1)
    value_dim = _number(h, "attention.value_length", int, head_dim)
    rotary_dims = _number(h, "rope.dimension_count", int, head_dim)
    if value_dim != head_dim or rotary_dims != head_dim:
        raise ModelLoadError(f"{h.path}: key/value/rotary dims {head_dim}/{value_dim}/{rotary_dims} differ; "
                             "only full-width RoPE with equal key and value sizes is supported")
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
        tie_embeddings="output.weight" not in h.tensor_types,
        qkv_bias="blk.0.attn_q.bias" in h.tensor_types,
        name=str(h.metadata.get("general.name") or Path(h.path).stem), source=h.path,
    )
    if is_gemma(h.architecture):
        fields.update(_gemma_fields(h, fields))
    try:
        return ModelConfig(**fields)
    except ConfigError as exc:
        raise ModelLoadError(f"{h.path}: the metadata does not describe a valid model: {exc}") from exc


def _gemma_fields(h: GGUFHeader, fields: Mapping[str, Any]) -> dict[str, Any]:
    if fields["rope_scaling"].kind != "none":  # llama.cpp scales only the global layers' RoPE on Gemma 3
        raise ModelLoadError(f"{h.path}: RoPE scaling on a {h.architecture} file applies to its global layers "
                             "only, which txviz's config cannot express; not supported")
    return gemma_fields(h.architecture, lambda key, kind: _number(h, key, kind), h.arch_key,
                        fields["d_model"], fields["n_layers"], lambda name: name in h.tensor_types)


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


def txviz_names(gguf_name: str, config: ModelConfig) -> dict[str, str | int] | None:
    """Where a GGUF tensor goes: {"name": …} or, for stacked experts, {"expert_param": …, "layer": i}."""
    if gguf_name in GLOBAL_NAMES:
        return {"name": GLOBAL_NAMES[gguf_name]}
    match = LAYER_TENSOR.fullmatch(gguf_name)
    if not match or int(match[1]) >= config.n_layers:
        return None
    layer, key = int(match[1]), match[2]
    if key in LAYER_NAMES:
        return {"name": f"layers.{layer}.{LAYER_NAMES[key]}"}
    if key in EXPERT_NAMES:
        return {"expert_param": EXPERT_NAMES[key], "layer": layer}
    return None


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


def check_tensor_shapes(reader, config: ModelConfig) -> None:
    """Every tensor's shape against the decoder ``config`` describes, before anything is dequantized:
    a file whose metadata and tensors disagree is refused naming the tensor, not after seconds of work."""
    from txviz.model import Decoder

    check_sizes(reader, config)  # before building even an empty skeleton of the model the metadata describes
    with torch.device("meta"):
        expected = {name: tuple(p.shape) for name, p in Decoder(config).state_dict().items()}
    for tensor in reader.tensors:
        target = txviz_names(tensor.name, config)
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
        if target is None:
            continue  # refused by name in dequantized_state_dict
        if "expert_param" in target:
            name = f"layers.{target['layer']}.ffn.experts.0.{target['expert_param']}"
            want = (config.n_experts, *expected.get(name, shape[1:]))
        else:
            name, want = target["name"], expected.get(target["name"], shape)
        if shape != want:
            raise ModelLoadError(f"tensor {tensor.name} has shape {shape}, but the metadata describes "
                                 f"{want} for {name}")


def check_sizes(reader, config: ModelConfig) -> None:
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
    held = sum(int(t.n_elements) for t in reader.tensors if txviz_names(t.name, config) is not None)
    described = count_params(config)
    if described > 4 * held:  # far beyond the weights: hostile; a near miss is named tensor by tensor next
        raise ModelLoadError(f"the metadata describes a model of {described:,} parameters, but the file's "
                             f"tensors hold {held:,}: its sizes (layers, widths, heads, experts, vocabulary) "
                             "do not match its weights")


def dequantized_state_dict(reader, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Every tensor of the file, dequantized to float32 on the CPU, under txviz's parameter names.
    Q/K rows are un-permuted only for the architectures llama.cpp permutes (PERMUTED_ARCHITECTURES)."""
    architecture = _architecture_of(reader)
    permuted = architecture in PERMUTED_ARCHITECTURES
    check_tensor_shapes(reader, config)
    state: dict[str, torch.Tensor] = {}
    for tensor in reader.tensors:
        target = txviz_names(tensor.name, config)
        if target is None:
            raise ModelLoadError(f"tensor {tensor.name} ({tensor.tensor_type.name}) has no place in a "
                                 f"{config.n_layers}-layer {architecture or 'llama'} decoder; this GGUF variant "
                                 "is not supported")
        weight = dequantize_tensor(tensor)
        if "expert_param" in target:  # (E, out, in): one slice per expert
            for e in range(weight.shape[0]):
                # a copy, not a view: serializers refuse tensors that share storage
                state[f"layers.{target['layer']}.ffn.experts.{e}.{target['expert_param']}"] = weight[e].clone()
        else:
            state[target["name"]] = _unpermute_if_rope(target["name"], weight, config, permuted)
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
