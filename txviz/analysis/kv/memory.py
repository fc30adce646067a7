"""How much memory a model needs to serve, in bytes: weights, the KV cache, activations, and the bill of all
three at a context length; with FLOPs per token. The model is a
``txviz.analysis.kv.memory_model.MemoryModel`` (or a ModelConfig); whether the bill fits a GPU is
``txviz.analysis.kv.fit``'s.

    KV bytes = layers × tokens_kept × batch × bytes_per_element × (2·kv_heads·head_dim   | MHA/GQA/MQA
                                                                   latent_dim + rope_dim) | MLA

A layer with a sliding window of W (or chunks of W) keeps at most W tokens; when every layer has one the
cache stops growing. A linear-attention or state-space layer keeps no K and V but a fixed state per
sequence, counted once per sequence (in the KV dtype when it is a float, else bf16). Weights take n_params × bytes_per_weight: all experts of a MoE stay in memory although
only top-k run per token. Quantized sizes are ideal (no scales or zero points; real int4 formats add
a few percent). For a ModelConfig these equal ``txviz.model.kv_cache``'s formula and the bytes of a
real KVCache (tests/analysis/kv/test_memory.py). 

Activations (``activation_bytes``) are an estimate with its assumptions written out: the peak of one
inference forward pass, one layer's tensors alive at a time, fused attention (no T×T scores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from txviz.analysis.kv.memory_model import Spec, as_memory_model, preset
from txviz.analysis.kv.presets import PRESETS
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}  # ideal: no scales
WEIGHT_DTYPES = tuple(DTYPE_BYTES)
PUBLISHED = "as published"  # a weight "dtype": the checkpoint's own quantization (MemoryModel.weight_format)
KV_DTYPES = tuple(dtype for dtype in DTYPE_BYTES if dtype != "int8")  # int8 is offered for weights only
GIB = 1 << 30


# ---- bytes ----------------------------------------------------------------------------------------
def dtype_bits(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from: {', '.join(DTYPE_BYTES)}")
    return int(DTYPE_BYTES[dtype] * 8)


def _bytes(elements: int, dtype: str) -> int:
    return -(-elements * dtype_bits(dtype) // 8)  # packed sub-byte types round up to whole bytes


def token_kv_bytes(spec: Spec, kv_dtype: str = "bf16") -> int:
    """Bytes one token adds to the cache of a batch of one, while no window has filled."""
    model = as_memory_model(spec)
    return _bytes(model.kv_layers * model.kv_elements_per_token_layer, kv_dtype)


def token_kv_bytes_past_windows(spec: Spec, kv_dtype: str = "bf16") -> int:
    """Bytes one token adds once every window is full: only the layers without a window still grow (0
    when every layer has one or keeps no K/V; ``token_kv_bytes`` when none has)."""
    model = as_memory_model(spec)
    growing = sum(group.layers for group in model.layer_groups if group.grows)
    return _bytes(growing * model.kv_elements_per_token_layer, kv_dtype)


def group_kv_bytes(spec: Spec, group, tokens: int, batch: int = 1, kv_dtype: str = "bf16") -> int:
    """Bytes the layers of one group (txviz.analysis.kv.layer_groups) keep at ``tokens`` tokens: K and V of
    the tokens they keep, or their fixed state per sequence (none before the first token)."""
    model = as_memory_model(spec)
    if not group.caches_kv:
        return _bytes(group.layers * group.state_elements * batch, state_dtype(kv_dtype)) if tokens else 0
    return _bytes(group.layers * group.kept(tokens) * batch * model.kv_elements_per_token_layer, kv_dtype)


def state_dtype(kv_dtype: str) -> str:
    """The dtype a linear-attention or state-space layer keeps its state in: the KV dtype when it is a float,
    else bf16 (no server quantizes a recurrent state the way it may quantize K and V)."""
    return kv_dtype if kv_dtype in ("fp32", "bf16", "fp16") else "bf16"


def kv_cache_bytes_at(spec: Spec, tokens: int, batch: int = 1, kv_dtype: str = "bf16") -> int:
    """Bytes of the cache holding ``tokens`` tokens for each of ``batch`` sequences, with the fixed state of
    layers that keep no K and V."""
    model = as_memory_model(spec)
    if tokens < 0 or batch < 0:
        raise ValueError(f"tokens and batch must be >= 0, got {tokens} and {batch}")
    kept = sum(group.layers * group.kept(tokens) for group in model.layer_groups)
    state = state_bytes(model, batch, kv_dtype) if tokens else 0
    return _bytes(kept * batch * model.kv_elements_per_token_layer, kv_dtype) + state


def state_bytes(spec: Spec, batch: int = 1, kv_dtype: str = "bf16") -> int:
    """The fixed state of the layers that keep no K and V, for ``batch`` sequences (0 for a transformer)."""
    return _bytes(as_memory_model(spec).state_elements_per_sequence * batch, state_dtype(kv_dtype))


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


def token_flops(spec: Spec, context: int) -> int:
    """Forward FLOPs of one token at position ``context`` (Kaplan et al. 2020): 2 per matrix weight
    it multiplies (its active parameters less looked-up tables, norm weights and biases) plus
    2·H·(d_qk + d_v) per position each layer attends to (its window, if any): the scores and the
    weighted values. For a config of a family txviz runs, read by txviz.geometry, this equals
    ``txviz.model.counts.flops_per_token`` (tests/geometry)."""
    model = as_memory_model(spec)
    if context < 0:
        raise ValueError(f"context must be >= 0, got {context}")
    attended = sum(group.layers * group.kept(context) for group in model.layer_groups)
    per_position = 2 * model.n_heads * ((model.qk_head_dim or model.head_dim) + model.head_dim)
    return 2 * ((model.active_params or model.n_params) - model.unmultiplied_params) + per_position * attended


# ---- series for charts ----------------------------------------------------------------------------
def context_lengths(max_tokens: int, start: int = 256) -> list[int]:
    """Powers of two from ``start`` up to ``max_tokens``, plus ``max_tokens`` itself; for a context under
    four times ``start`` (a tiny model's 64) from an eighth of it, so that no length past the context is
    drawn and the chart keeps a few points."""
    if max_tokens < 4 * start:
        start = max(1, min(start, (1 << (max_tokens.bit_length() - 1)) // 8))
    lengths = [start]
    while lengths[-1] * 2 <= max_tokens:
        lengths.append(lengths[-1] * 2)
    return lengths + ([max_tokens] if lengths[-1] != max_tokens else [])


def kv_vs_context(models: Mapping[str, Spec], lengths: Sequence[int], *, batch: int = 1,
                  kv_dtype: str = "bf16") -> dict:
    """{"tokens": [...], "bytes": {label: [KV bytes at each length]}, ...} for a line chart."""
    return {"tokens": list(lengths), "batch": batch, "kv_dtype": kv_dtype,
            "bytes": {label: [kv_cache_bytes_at(m, t, batch, kv_dtype) for t in lengths] for label, m in models.items()}}


def kv_vs_batch(spec: Spec, batches: Sequence[int], *, tokens: int, kv_dtype: str = "bf16",
                weight_dtype: str = "bf16") -> dict:
    """KV bytes grow with the batch, weights do not: {"batch", "kv_bytes", "weight_bytes", "total_bytes"}."""
    weights = weight_bytes(spec, weight_dtype)
    kv = [kv_cache_bytes_at(spec, tokens, b, kv_dtype) for b in batches]
    return {"batch": list(batches), "tokens": tokens, "kv_bytes": kv, "weight_bytes": weights,
            "total_bytes": [weights + k for k in kv]}


def list_presets() -> list[dict]:
    """One row per preset: key, name, kind, KV bytes per token in bf16, parameters."""
    rows = []
    for key in PRESETS:
        model = preset(key)
        rows.append({"preset": key, "name": model.name, "kind": model.kind, "n_params": model.n_params,
                     "kv_bytes_per_token_bf16": token_kv_bytes(model, "bf16"),
                     "sliding_window": model.sliding_window, "max_context": model.max_context})
    return rows


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
    return MemoryBill(tokens, weight_bytes(spec, weight_dtype), kv_cache_bytes_at(spec, tokens, batch, kv_dtype),
                      activation_bytes(spec, tokens, batch, activation_dtype(weight_dtype), prefill_chunk))


def bill_vs_context(spec: Spec, lengths: Sequence[int], **settings) -> dict[str, list[int]]:
    """{"tokens", "weights", "kv_cache", "activations", "total"}: one list each, for a stacked chart."""
    bills = [memory_bill(spec, t, **settings) for t in lengths]
    return {"tokens": list(lengths), **{k: [getattr(b, k) for b in bills]
                                        for k in ("weights", "kv_cache", "activations", "total")}}
