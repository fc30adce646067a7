"""The memory report: what serving one model takes under one set of choices, built once for every
reader of it (the ``txviz memory`` command and the KV page's calculator), so that both say the same
numbers for the same input. It gathers the model's KV bytes per token, weights, FLOPs, the bill at a
context length and, given a GPU, what fits on it (``txviz.analysis.kv.memory`` and ``.fit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from txviz.analysis.kv import memory
from txviz.analysis.kv.fit import ContextFit, Fit, fit, max_context
from txviz.analysis.kv.layer_figures import group_figures
from txviz.analysis.kv.memory_model import MemoryModel, kind_variants

UNKNOWN_CONTEXT = 131072  # the longest length charted when a model does not say what it was built for


@dataclass(frozen=True)
class MemoryReport:
    """Bytes and FLOPs of ``model`` at ``tokens`` tokens for ``batch`` sequences. ``fit`` (the whole bill)
    and ``kv_fit`` (the KV cache beside the weights) only when a GPU was given. ``kinds``: the same
    model with MHA, GQA and MQA attention, each one's weights, FLOPs and KV bytes (none for MLA)."""

    model: MemoryModel
    tokens: int
    batch: int
    kv_dtype: str
    weight_dtype: str
    prefill_chunk: int | None
    kv_bytes_per_token: int
    kv_bytes_per_token_past_windows: int
    kv_cache_bytes: int
    weight_bytes: int
    kv_bytes_per_token_by_dtype: dict[str, int]
    weight_bytes_by_dtype: dict[str, int]
    flops_per_token: int
    kinds: dict[str, dict]
    bill: memory.MemoryBill
    gpu_gib: float | None = None
    fit: Fit | None = None
    kv_fit: ContextFit | None = None

    @property
    def settings(self) -> dict:
        """The memory functions' keyword settings."""
        return dict(batch=self.batch, weight_dtype=self.weight_dtype, kv_dtype=self.kv_dtype,
                    prefill_chunk=self.prefill_chunk)

    @property
    def notes(self) -> list[str]:
        """What a reader of the numbers should know: the published format's assumption (what stays
        unquantized), and what fits the GPU in words."""
        notes = [self.model.weight_format.assumption] if self.weight_dtype == memory.PUBLISHED else []
        return notes + ([fits_note(self.fit, self.model)] if self.fit is not None else [])

    def to_dict(self, origin: Mapping = {}, extras: Mapping = {}) -> dict:
        """The report as plain data (the CLI's JSON): ``origin`` (where the model came from) first,
        ``extras`` (what only a config.json tells) after the model's name, kind and source."""
        model = self.model
        groups = group_figures(model, self.tokens, self.batch, self.kv_dtype)
        result = {**origin, "model": model.name, "kind": model.kind,
                  "layer_kinds": [group["summary"] for group in groups], "source": model.source, **extras,
                  "n_layers": model.n_layers, "n_heads": model.n_heads, "kv_heads": model.kv_heads,
                  "head_dim": model.head_dim, "latent_dim": model.latent_dim, "rope_dim": model.rope_dim,
                  "d_model": model.d_model, "vocab_size": model.vocab_size,
                  "max_position_embeddings": model.max_context,
                  "n_params": model.n_params, "active_params": model.active_params,
                  "n_experts": model.n_experts, "experts_per_token": model.experts_per_token,
                  "sliding_window": model.sliding_window, "window_layers": model.window_layers,
                  "layer_groups": groups, "attention_sinks_per_layer": model.attention_sinks,
                  "state_bytes_per_sequence": memory.state_bytes(model, 1, self.kv_dtype),
                  "seq": self.tokens, "batch": self.batch, "kv_dtype": self.kv_dtype,
                  "weight_dtype": self.weight_dtype,
                  "weight_format": None if model.weight_format is None else {
                      "scheme": model.weight_format.scheme, "bits_per_parameter": dict(model.weight_format.bits),
                      "assumption": model.weight_format.assumption},
                  "kv_bytes_per_token": self.kv_bytes_per_token,
                  "kv_bytes_per_token_past_windows": self.kv_bytes_per_token_past_windows,
                  "kv_cache_bytes": self.kv_cache_bytes, "weight_bytes": self.weight_bytes,
                  "kv_bytes_per_token_by_dtype": self.kv_bytes_per_token_by_dtype,
                  "weight_bytes_by_dtype": self.weight_bytes_by_dtype, "flops_per_token": self.flops_per_token}
        if self.kinds:
            result["kinds"] = self.kinds
        bill = self.bill
        result["bill"] = {"tokens": self.tokens, "weights": bill.weights, "kv_cache": bill.kv_cache,
                          "activations": bill.activations, "total": bill.total, "prefill_chunk": self.prefill_chunk}
        if self.fit is not None:
            result["fits"] = fits_dict(self.fit, self.model)
        if self.kv_fit is not None:
            result["max_context"] = {**self.kv_fit.to_dict(), "counts": "weights + KV cache (no activations)"}
        return result


def charted_lengths(model: MemoryModel) -> list[int]:
    """The context lengths the calculator charts and fits over: powers of two up to the model's context."""
    return memory.context_lengths(int(model.max_context or UNKNOWN_CONTEXT))


def default_weight_dtype(model: MemoryModel) -> str:
    """The format a model is sized in unless another is chosen: its published one, else bf16."""
    return memory.PUBLISHED if model.weight_format else "bf16"


def memory_report(model: MemoryModel, tokens: int | None = None, *, batch: int = 1, kv_dtype: str = "bf16",
                  weight_dtype: str | None = None, prefill_chunk: int | None = None,
                  gpu_gib: float | None = None) -> MemoryReport:
    """The report at ``tokens`` tokens; without them, at the length the GPU's fit sums the bill up
    (the calculator's), else at the model's own context."""
    weight_dtype = weight_dtype or default_weight_dtype(model)
    settings = dict(batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype, prefill_chunk=prefill_chunk)
    whole = None if gpu_gib is None else fit(model, charted_lengths(model), gpu_gib, **settings)
    tokens = tokens if tokens is not None else whole.at if whole is not None else model.max_context
    if tokens is None:
        raise ValueError(f"{model.name} gives no context length (max_position_embeddings): give the tokens")
    kinds = {} if model.kind == "MLA" else {  # the KV heads and the K/V projections serving them
        kind: {"kv_heads": variant.kv_heads, "n_params": variant.n_params,
               "weight_bytes": memory.weight_bytes(variant, weight_dtype),
               "flops_per_token": memory.token_flops(variant, tokens),
               "kv_bytes_per_token": memory.token_kv_bytes(variant, kv_dtype)}
        for kind, variant in kind_variants(model).items()}
    kv_fit = None if gpu_gib is None else max_context(model, gpu_gib, batch=batch, kv_dtype=kv_dtype,
                                                      weight_dtype=weight_dtype)
    return MemoryReport(
        model, tokens, batch, kv_dtype, weight_dtype, prefill_chunk,
        kv_bytes_per_token=memory.token_kv_bytes(model, kv_dtype),
        kv_bytes_per_token_past_windows=memory.token_kv_bytes_past_windows(model, kv_dtype),
        kv_cache_bytes=memory.kv_cache_bytes_at(model, tokens, batch, kv_dtype),
        weight_bytes=memory.weight_bytes(model, weight_dtype),
        kv_bytes_per_token_by_dtype={d: memory.token_kv_bytes(model, d) for d in memory.KV_DTYPES},
        weight_bytes_by_dtype={d: memory.weight_bytes(model, d) for d in memory.weight_dtypes(model)},
        flops_per_token=memory.token_flops(model, tokens), kinds=kinds,
        bill=memory.memory_bill(model, tokens, **settings), gpu_gib=gpu_gib, fit=whole, kv_fit=kv_fit)


def fits_note(summary: Fit, model: MemoryModel) -> str:
    longest = summary.longest
    said = "no context length is too long" if longest is None else \
        "not even one token fits" if longest == 0 else f"{longest:,} tokens fit"
    built = f"; the model was built for {model.max_context:,}" if model.max_context else ""
    return (f"Counting weights, KV cache and activations (as the app's calculator), {said} in "
            f"{summary.gpu_gib:g} GiB{built}.")


def fits_dict(summary: Fit, model: MemoryModel) -> dict:
    """The longest context whose weights + KV cache + activations fit, and the bill where it is summed up."""
    bill = summary.bill
    return {"longest_tokens": summary.longest, "counts": "weights + KV cache + activations",
            "gpu_gib": summary.gpu_gib, "at_tokens": summary.at, "weights": bill.weights, "kv_cache": bill.kv_cache,
            "activations": bill.activations, "total": bill.total, "free_gib": round(summary.free_gib, 4),
            "note": fits_note(summary, model)}
