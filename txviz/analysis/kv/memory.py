"""How much memory a model needs to serve (seed §4.1, §5.2, §6): weights, the KV cache, activations.

Per token and layer the cache keeps K and V for every KV head (MHA: one per query head; GQA: one per
group; MQA: one), or, with DeepSeek's multi-head latent attention (MLA), one compressed latent plus
one small RoPE key shared by all heads (DeepSeek-AI 2024):

    KV bytes = layers × tokens_kept × batch × bytes_per_element × (2·kv_heads·head_dim   | MHA/GQA/MQA
                                                                   latent_dim + rope_dim) | MLA

A layer with a sliding window of W keeps at most W tokens; when every layer has one the cache stops
growing. Weights take n_params × bytes_per_weight: all experts of a MoE stay in memory although
only top-k run per token. Quantized sizes are ideal (no scales or zero points; real int4 formats add
a few percent). For a ModelConfig these equal ``txviz.model.kv_cache``'s formula and the bytes of a
real KVCache (tests/analysis/kv/test_memory.py). Presets: ``txviz.analysis.kv.presets``; any Hugging Face
config.json, of a family txviz can run or not: ``txviz.geometry`` (``MemoryModel.from_geometry``).

Activations (``activation_bytes``) are an estimate with its assumptions written out: the peak of one
inference forward pass, one layer's tensors alive at a time, fused attention (no T×T scores).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, Mapping, Sequence

from txviz.analysis.kv.presets import PRESETS
from txviz.config import ModelConfig
from txviz.model.counts import count_active_params, count_params
from txviz.model.kv_cache import kv_elements_per_token_layer

Kind = Literal["MHA", "GQA", "MQA", "MLA"]
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}  # ideal: no scales
WEIGHT_DTYPES = tuple(DTYPE_BYTES)
PUBLISHED = "as published"  # a weight "dtype": the checkpoint's own quantization (MemoryModel.weight_format)
KV_DTYPES = tuple(dtype for dtype in DTYPE_BYTES if dtype != "int8")  # int8 is offered for weights only
GIB = 1 << 30


@dataclass(frozen=True)
class MemoryModel:
    """What sets a model's memory, for models txviz can run (``from_config``) and those it cannot (MLA).

    For MLA, ``kv_heads``·``head_dim`` describe attention after the latent is expanded (informative
    only); the cache holds ``latent_dim + rope_dim`` elements per token and layer. ``window_layers``:
    how many layers use ``sliding_window`` (None: all of them).
    """

    name: str
    n_layers: int
    n_heads: int
    kv_heads: int
    head_dim: int
    n_params: int
    latent_dim: int = 0  # MLA: width of the compressed KV latent (DeepSeek's kv_lora_rank)
    rope_dim: int = 0  # MLA: the decoupled RoPE key, one per token shared by all heads
    sliding_window: int | None = None
    window_layers: int | None = None
    active_params: int | None = None  # per token (MoE); None: all of n_params
    max_context: int | None = None  # what the model was built for (max_position_embeddings)
    source: str = ""
    d_model: int = 0  # residual width; 0: n_heads × head_dim
    ffn_width: int = 0  # FFN hidden width one token runs through (a MoE: its top-k experts'); 0: 4 × d_model
    vocab_size: int = 0  # 0: unknown (no logits counted)
    unmultiplied_params: int = 0  # no matmul FLOPs: looked-up embedding tables, norm weights, biases
    qk_head_dim: int = 0  # width of one query·key product (MLA: nope + rope); 0: head_dim
    n_experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    assumptions: tuple[str, ...] = ()  # what reading a config of an unknown family assumed
    kv_bias: bool = False  # K and V projections carry biases
    param_groups: tuple[tuple[str, int], ...] = ()  # per txviz.geometry.params.GROUPS (configs only)
    weight_format: object = None  # the published quantization (txviz.geometry.quantization.WeightFormat)

    def __post_init__(self) -> None:
        for key in ("n_layers", "n_heads", "kv_heads", "head_dim", "n_params"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        if self.latent_dim == 0 and self.n_heads % self.kv_heads:
            raise ValueError(f"n_heads={self.n_heads} is not divisible by kv_heads={self.kv_heads}")
        if self.latent_dim < 0 or self.rope_dim < 0 or (self.rope_dim and not self.latent_dim):
            raise ValueError("latent_dim and rope_dim describe MLA: rope_dim needs latent_dim > 0")
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise ValueError(f"sliding_window must be positive or None, got {self.sliding_window}")
        if self.window_layers is None and self.sliding_window:
            object.__setattr__(self, "window_layers", self.n_layers)
        if self.window_layers is not None and not 0 <= self.window_layers <= self.n_layers:
            raise ValueError(f"window_layers={self.window_layers} must be between 0 and n_layers={self.n_layers}")
        if min(self.d_model, self.ffn_width, self.vocab_size) < 0:
            raise ValueError("d_model, ffn_width and vocab_size must be >= 0 (0: derived or unknown)")
        if not self.d_model:
            object.__setattr__(self, "d_model", self.n_heads * self.head_dim)
        if not self.ffn_width:
            object.__setattr__(self, "ffn_width", 4 * self.d_model)

    @property
    def kind(self) -> Kind:
        if self.latent_dim:
            return "MLA"
        if self.kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def kv_elements_per_token_layer(self) -> int:
        """Elements one token adds to one layer's cache."""
        if self.latent_dim:
            return self.latent_dim + self.rope_dim
        return kv_elements_per_token_layer(self.kv_heads, self.head_dim)

    @property
    def n_window_layers(self) -> int:
        return self.window_layers if self.sliding_window else 0

    @classmethod
    def from_config(cls, config: ModelConfig) -> "MemoryModel":
        return cls(name=config.name, n_layers=config.n_layers, n_heads=config.n_heads,
                   kv_heads=config.n_kv_heads, head_dim=config.head_dim, n_params=count_params(config),
                   active_params=count_active_params(config),
                   sliding_window=config.sliding_window if any(config.layer_windows) else None,
                   window_layers=sum(w is not None for w in config.layer_windows),  # Gemma 2/3: some layers
                   max_context=config.max_seq_len, source=config.source or "computed from its ModelConfig",
                   d_model=config.d_model, vocab_size=config.vocab_size,
                   ffn_width=config.ffn_hidden * (config.top_k if config.is_moe else 1), kv_bias=config.qkv_bias)

    @classmethod
    def from_geometry(cls, geometry, name: str, source: str) -> "MemoryModel":
        """A config's geometry (txviz.geometry) in the calculator's terms: one KV width and one window
        width for all layers, which every family read there has."""
        widths = geometry.window_sizes
        if len(set(geometry.kv_heads)) > 1 or len(set(geometry.head_dims)) > 1 or len(widths) > 1:
            raise ValueError(f"{name}: layers differ in KV heads, head size or window width, which the "
                             "calculator does not model")
        return cls(name=name, n_layers=geometry.n_layers, n_heads=geometry.n_heads, kv_heads=geometry.kv_heads[0],
                   head_dim=geometry.head_dims[0], n_params=geometry.n_params,
                   latent_dim=geometry.latent_dim, rope_dim=geometry.rope_dim,
                   sliding_window=min(widths) if widths else None,
                   window_layers=sum(w is not None for w in geometry.windows) if widths else None,
                   active_params=geometry.active_params, max_context=geometry.max_context, source=source,
                   d_model=geometry.d_model, ffn_width=geometry.ffn_width, vocab_size=geometry.vocab_size,
                   unmultiplied_params=geometry.unmultiplied_params, qk_head_dim=geometry.qk_head_dim,
                   n_experts=geometry.n_experts, experts_per_token=geometry.experts_per_token,
                   assumptions=geometry.assumptions, kv_bias=geometry.kv_bias, param_groups=geometry.param_groups,
                   weight_format=geometry.weight_format)

    @classmethod
    def from_config_json(cls, data: bytes, filename: str = "config.json") -> "MemoryModel":
        """An uploaded config.json of any causal LM (txviz.geometry), named after what it describes
        rather than its family ("llama"): its ``_name_or_path``, else the file's own name unless that is
        just "config", then the architecture, parameters and layers, so that two uploads are told apart."""
        from pathlib import PurePath

        from txviz.geometry import read_geometry
        from txviz.loading.hf_config import parse_config_json

        raw, _ = parse_config_json(data)
        geometry = read_geometry(raw)
        named = str(raw.get("_name_or_path") or "").rstrip("/").split("/")[-1]
        stem = PurePath(filename).stem
        named = named or ("" if stem.lower() in ("config", "") else stem)
        size = (f"{geometry.architecture}, {params_text(geometry.n_params)} params, "
                f"{geometry.n_layers} layer{'s' * (geometry.n_layers != 1)} × {geometry.d_model}")
        source = f"uploaded file {filename}" + (f" ({raw['_name_or_path']})" if named and raw.get("_name_or_path")
                                                 else "")
        notes = "".join(f"; {note}" for note in geometry.notes)  # what the count leaves out (a vision tower)
        return cls.from_geometry(geometry, f"{named} ({size})" if named else size, source + notes)


Spec = MemoryModel | ModelConfig


def params_text(n: int) -> str:
    """A parameter count as read: billions to two decimals, millions to one, else the count itself."""
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def as_memory_model(spec: Spec) -> MemoryModel:
    return spec if isinstance(spec, MemoryModel) else MemoryModel.from_config(spec)


def preset(name: str) -> MemoryModel:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from: {', '.join(PRESETS)}")
    fields = dict(PRESETS[name])
    published = fields.pop("quantization_config", None)
    if published is not None:
        from txviz.geometry.quantization import read_quantization

        fields["weight_format"] = read_quantization({"quantization_config": published},
                                                    dict(fields["param_groups"]))[0]
    return MemoryModel(**fields)


def list_presets() -> list[dict]:
    """One row per preset: key, name, kind, KV bytes per token in bf16, parameters."""
    rows = []
    for key in PRESETS:
        model = preset(key)
        rows.append({"preset": key, "name": model.name, "kind": model.kind, "n_params": model.n_params,
                     "kv_bytes_per_token_bf16": kv_bytes_per_token(model, "bf16"),
                     "sliding_window": model.sliding_window, "max_context": model.max_context})
    return rows


# ---- bytes ----------------------------------------------------------------------------------------
def dtype_bits(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from: {', '.join(DTYPE_BYTES)}")
    return int(DTYPE_BYTES[dtype] * 8)


def _bytes(elements: int, dtype: str) -> int:
    return -(-elements * dtype_bits(dtype) // 8)  # packed sub-byte types round up to whole bytes


def kv_bytes_per_token(spec: Spec, kv_dtype: str = "bf16") -> int:
    """Bytes one token adds to the cache of a batch of one, while no window has filled."""
    model = as_memory_model(spec)
    return _bytes(model.n_layers * model.kv_elements_per_token_layer, kv_dtype)


def kv_bytes_per_token_past_windows(spec: Spec, kv_dtype: str = "bf16") -> int:
    """Bytes one token adds once every window is full: only the layers without a window still grow (0
    when every layer has one; ``kv_bytes_per_token`` when none has)."""
    model = as_memory_model(spec)
    return _bytes((model.n_layers - model.n_window_layers) * model.kv_elements_per_token_layer, kv_dtype)


def kv_cache_bytes(spec: Spec, tokens: int, batch: int = 1, kv_dtype: str = "bf16") -> int:
    """Bytes of the cache holding ``tokens`` tokens for each of ``batch`` sequences."""
    model = as_memory_model(spec)
    if tokens < 0 or batch < 0:
        raise ValueError(f"tokens and batch must be >= 0, got {tokens} and {batch}")
    windowed = model.n_window_layers
    kept = (model.n_layers - windowed) * tokens + windowed * min(tokens, model.sliding_window or tokens)
    return _bytes(kept * batch * model.kv_elements_per_token_layer, kv_dtype)


def weight_dtypes(spec: Spec) -> tuple[str, ...]:
    """The weight formats offered for a model: its published one first, when its config gives one."""
    return ((PUBLISHED,) if as_memory_model(spec).weight_format else ()) + WEIGHT_DTYPES


def weight_bytes(spec: Spec, weight_dtype: str = "bf16") -> int:
    """All parameters in ``weight_dtype``; ``PUBLISHED``: each group at its published format's bits."""
    model = as_memory_model(spec)
    if weight_dtype == PUBLISHED:
        if model.weight_format is None:
            raise ValueError(f"{model.name} gives no published quantization; choose from: {', '.join(WEIGHT_DTYPES)}")
        return model.weight_format.bytes_of(dict(model.param_groups))
    return _bytes(model.n_params, weight_dtype)


def flops_per_token(spec: Spec, context: int) -> int:
    """Forward FLOPs of one token at position ``context`` (Kaplan et al. 2020, §2.1): 2 per matrix weight
    it multiplies (its active parameters less looked-up tables, norm weights and biases) plus
    2·H·(d_qk + d_v) per position each layer attends to (its window, if any): the scores and the
    weighted values. For a config of a family txviz runs, read by txviz.geometry, this equals
    ``txviz.model.counts.flops_per_token`` (tests/geometry)."""
    model = as_memory_model(spec)
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    windowed = model.n_window_layers
    attended = (model.n_layers - windowed) * context + windowed * min(context, model.sliding_window or context)
    per_position = 2 * model.n_heads * ((model.qk_head_dim or model.head_dim) + model.head_dim)
    return 2 * ((model.active_params or model.n_params) - model.unmultiplied_params) + per_position * attended


# ---- what fits ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ContextFit:
    """The longest context whose KV cache fits next to the weights. ``max_tokens`` None: the cache
    stops growing (a window on every layer) before it fills the memory, so KV memory sets no limit."""

    gpu_bytes: int
    weight_bytes: int
    free_bytes: int  # after weights and reserve; negative when the weights alone do not fit
    max_tokens: int | None
    model_max_context: int | None
    note: str

    @property
    def unbounded_by_kv(self) -> bool:
        return self.max_tokens is None

    @property
    def usable_tokens(self) -> int | None:
        """What fits and what the model was built for, whichever is shorter (None: neither limits)."""
        limits = [n for n in (self.max_tokens, self.model_max_context) if n is not None]
        return min(limits) if limits else None

    def to_dict(self) -> dict:
        return {**self.__dict__, "unbounded_by_kv": self.unbounded_by_kv, "usable_tokens": self.usable_tokens}


def _longest_fit(model: MemoryModel, free_bits: int, batch: int, bits: int) -> int | None:
    """Largest t with kv_cache_bits(t) <= free_bits; None if no t ever exceeds it."""
    per_layer = batch * model.kv_elements_per_token_layer * bits  # bits per token per layer
    all_growing = free_bits // (per_layer * model.n_layers)
    window, windowed = model.sliding_window, model.n_window_layers
    if not windowed or all_growing < window:
        return all_growing
    full_layers = model.n_layers - windowed
    if not full_layers:
        return None
    return (free_bits - per_layer * windowed * window) // (per_layer * full_layers)


def max_context(spec: Spec, gpu_gib: float, *, batch: int = 1, kv_dtype: str = "bf16",
                weight_dtype: str = "bf16", reserve_gib: float = 0.0) -> ContextFit:
    """Longest context for ``batch`` sequences on a GPU of ``gpu_gib`` GiB, after the weights and a
    ``reserve_gib`` for activations and the runtime (which a real server also needs)."""
    model = as_memory_model(spec)
    if not (0 < gpu_gib < math.inf and 0 <= reserve_gib < math.inf) or batch < 1:
        raise ValueError(f"need gpu_gib > 0, batch >= 1, reserve_gib >= 0; got {gpu_gib}, {batch}, {reserve_gib}")
    gpu, weights = int(gpu_gib * GIB), weight_bytes(model, weight_dtype)
    free = gpu - int(reserve_gib * GIB) - weights
    tokens = 0 if free < 0 else _longest_fit(model, free * 8, batch, dtype_bits(kv_dtype))
    return ContextFit(gpu, weights, free, tokens, model.max_context,
                      _fit_note(model, weights, free, tokens, batch, kv_dtype))


def _fit_note(model: MemoryModel, weights: int, free: int, tokens: int | None, batch: int, kv_dtype: str) -> str:
    trained = f" (it was built for {model.max_context:,})" if model.max_context else ""
    if free < 0:
        return f"The weights alone ({weights / GIB:.1f} GiB) do not fit."
    if tokens is None:
        cap = kv_cache_bytes(model, model.sliding_window, batch, kv_dtype)
        return (f"Every layer keeps only the last {model.sliding_window:,} tokens, so the {kv_dtype} cache "
                f"stops growing at {cap / GIB:.2f} GiB: context length is unbounded by KV memory, "
                f"though each layer sees only its window{trained}.")
    windows = ""
    if model.n_window_layers and tokens > model.sliding_window:
        windows = (f" ({model.n_window_layers} of {model.n_layers} layer{'s' * (model.n_layers != 1)} keep"
                   f"{'s' * (model.n_window_layers == 1)} only {model.sliding_window:,})")
    return (f"Weights take {weights / GIB:.1f} GiB; the {free / GIB:.1f} GiB left hold {tokens:,} tokens "
            f"per sequence of {kv_dtype} KV cache for a batch of {batch}{windows}{trained}.")


# ---- series for charts ----------------------------------------------------------------------------
def context_lengths(max_tokens: int, start: int = 256) -> list[int]:
    """Powers of two from ``start`` up to ``max_tokens``, plus ``max_tokens`` itself."""
    lengths = [start]
    while lengths[-1] * 2 <= max_tokens:
        lengths.append(lengths[-1] * 2)
    return lengths + ([max_tokens] if lengths[-1] != max_tokens else [])


def kv_vs_context(models: Mapping[str, Spec], lengths: Sequence[int], *, batch: int = 1,
                  kv_dtype: str = "bf16") -> dict:
    """{"tokens": [...], "bytes": {label: [KV bytes at each length]}, ...} for a line chart."""
    return {"tokens": list(lengths), "batch": batch, "kv_dtype": kv_dtype,
            "bytes": {label: [kv_cache_bytes(m, t, batch, kv_dtype) for t in lengths] for label, m in models.items()}}


def kv_vs_batch(spec: Spec, batches: Sequence[int], *, tokens: int, kv_dtype: str = "bf16",
                weight_dtype: str = "bf16") -> dict:
    """KV bytes grow with the batch, weights do not: {"batch", "kv_bytes", "weight_bytes", "total_bytes"}."""
    weights = weight_bytes(spec, weight_dtype)
    kv = [kv_cache_bytes(spec, tokens, b, kv_dtype) for b in batches]
    return {"batch": list(batches), "tokens": tokens, "kv_bytes": kv, "weight_bytes": weights,
            "total_bytes": [weights + k for k in kv]}


def kind_variants(spec: Spec, gqa_kv_heads: int | None = None) -> dict[str, MemoryModel]:
    """The same model with MHA, GQA and MQA attention: the KV heads and the K/V projections that
    serve them (``with_kv_heads``). GQA keeps the model's own
    kv_heads if it has GQA, else ``gqa_kv_heads`` or the divisor of n_heads nearest n_heads/4;
    it is left out when n_heads has no divisor between 1 and n_heads (e.g. Falcon's 71)."""
    model = as_memory_model(spec)
    if model.kind == "MLA":
        raise ValueError("an MLA model caches a latent, not per-head K and V; compare presets instead")
    h = model.n_heads
    middle = [d for d in range(2, h) if h % d == 0]
    gqa = model.kv_heads if model.kind == "GQA" else gqa_kv_heads or (
        min(middle, key=lambda d: abs(d - h / 4)) if middle else None)
    counts = {"MHA": h, "GQA": gqa, "MQA": 1}
    return {kind: with_kv_heads(model, n, f"{model.name} as {kind} ({n} KV heads)")
            for kind, n in counts.items() if n is not None}


def with_kv_heads(model: MemoryModel, kv_heads: int, name: str) -> MemoryModel:
    """The model with ``kv_heads`` KV heads, and the K and V projections (d_model × kv_heads·head_dim
    each, per layer, and their biases) that many heads need: parameters, weight bytes, FLOPs and
    activations all follow, not only the cache."""
    extra = kv_heads - model.kv_heads
    weights = model.n_layers * 2 * model.d_model * model.head_dim * extra
    biases = model.n_layers * 2 * model.head_dim * extra if model.kv_bias else 0
    groups = dict(model.param_groups)
    if groups:
        groups["attention"] += weights
        groups["small"] += biases
    active = None if model.active_params is None else model.active_params + weights + biases
    return replace(model, kv_heads=kv_heads, name=name, n_params=model.n_params + weights + biases,
                   active_params=active, unmultiplied_params=model.unmultiplied_params + biases,
                   param_groups=tuple(groups.items()))


# ---- the whole bill: weights + KV cache + activations ---------------------------------------------
ACTIVATION_ASSUMPTIONS = (
    "Activations: the peak of one forward pass over the prompt (the prefill, serving's largest step), "
    "B·T·(2·d_model + (H + 2·H_kv)·d_head + 2·ffn_width) × bytes + B·vocab·4. Assumed: inference keeps no "
    "activations for a backward pass, so one layer's tensors are alive at a time (the residual stream and its "
    "normed copy, q, k and v, the FFN's two hidden projections; a MoE counts its top-k experts); attention is "
    "fused (FlashAttention / SDPA: no T×T score matrix); only the last position's logits are kept, in fp32; "
    "T is the whole prompt, or the chunk size with chunked prefill. Compute runs in the weights' float dtype "
    "(bf16 for quantized weights). Not counted: the CUDA context and allocator slack (often 0.5–1 GiB).")


def activation_dtype(weight_dtype: str) -> str:
    """Quantized weights are dequantized for the matmuls: their activations are bf16."""
    return weight_dtype if weight_dtype in ("fp32", "bf16", "fp16") else "bf16"


def activation_bytes(spec: Spec, tokens: int, batch: int = 1, act_dtype: str = "bf16",
                     prefill_chunk: int | None = None) -> int:
    """Peak activation bytes of prefilling ``tokens`` tokens for ``batch`` sequences (``ACTIVATION_ASSUMPTIONS``):

        T = min(tokens, prefill_chunk or tokens)
        B·T·(2·d_model + (H + 2·H_kv)·d_head + 2·ffn_width)·bytes(act_dtype) + B·vocab·4
    """
    model = as_memory_model(spec)
    if tokens < 0 or batch < 0 or (prefill_chunk is not None and prefill_chunk < 1):
        raise ValueError(f"need tokens, batch >= 0 and prefill_chunk >= 1; got {tokens}, {batch}, {prefill_chunk}")
    chunk = min(tokens, prefill_chunk or tokens)
    width = 2 * model.d_model + (model.n_heads + 2 * model.kv_heads) * model.head_dim + 2 * model.ffn_width
    logits = batch * model.vocab_size * 4 if tokens else 0
    return _bytes(batch * chunk * width, act_dtype) + logits


@dataclass(frozen=True)
class MemoryBill:
    """What serving ``tokens`` tokens for ``batch`` sequences takes on the device, in bytes."""

    tokens: int
    weights: int
    kv_cache: int
    activations: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations


def memory_bill(spec: Spec, tokens: int, *, batch: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                prefill_chunk: int | None = None) -> MemoryBill:
    return MemoryBill(tokens, weight_bytes(spec, weight_dtype), kv_cache_bytes(spec, tokens, batch, kv_dtype),
                      activation_bytes(spec, tokens, batch, activation_dtype(weight_dtype), prefill_chunk))


def bill_vs_context(spec: Spec, lengths: Sequence[int], **settings) -> dict[str, list[int]]:
    """{"tokens", "weights", "kv_cache", "activations", "total"}: one list each, for a stacked chart."""
    bills = [memory_bill(spec, t, **settings) for t in lengths]
    return {"tokens": list(lengths), **{k: [getattr(b, k) for b in bills]
                                        for k in ("weights", "kv_cache", "activations", "total")}}


def longest_context(spec: Spec, gpu_gib: float, *, limit: int = 1 << 40, **settings) -> int | None:
    """Largest context whose whole bill (weights + KV + activations) fits ``gpu_gib`` GiB; None when even
    ``limit`` tokens fit (windows on every layer and a bounded prefill chunk stop the growth)."""
    if not 0 < gpu_gib < math.inf:
        raise ValueError(f"gpu_gib must be positive and finite, got {gpu_gib}")
    gpu = int(gpu_gib * GIB)
    if memory_bill(spec, limit, **settings).total <= gpu:
        return None
    low, high = 0, limit  # bill(low) fits (or low is 0), bill(high) does not: the total grows with tokens
    if memory_bill(spec, 0, **settings).total > gpu:
        return 0
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if memory_bill(spec, middle, **settings).total <= gpu else (low, middle)
    return low
