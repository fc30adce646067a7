"""The memory calculator's figures, from a memory_model.MemoryModel and the chosen settings:
the whole bill against the GPU, the KV cache of each attention kind, weights by dtype, memory by
batch. Pure: no streamlit; sizes in GiB."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from app.figures import charts, memory_charts
from txviz.analysis.kv import memory, memory_model

BATCHES = (1, 2, 4, 8, 16, 32, 64)
BATCH_TOKENS = 8192  # the batch chart's context, or the longest charted when that is shorter


def _gib(values) -> np.ndarray:
    return np.array(values) / memory.GIB


def bill(model: memory_model.MemoryModel, kind: str, lengths: Sequence[int], settings: dict, gpu_gib: float) -> go.Figure:
    """Weights + KV cache + activations stacked per context length, under the GPU's line."""
    parts = memory.bill_vs_context(model, lengths, **settings)
    return memory_charts.memory_bill(
        lengths, {"weights": _gib(parts["weights"]), "KV cache": _gib(parts["kv_cache"]),
                  "activations": _gib(parts["activations"])}, gpu_gib=gpu_gib,
        title=f"Weights ({settings['weight_dtype']}) + KV cache ({settings['kv_dtype']}) + activations, "
              f"batch {settings['batch']} ({kind})")


def kv_by_kind(variants: Mapping[str, memory_model.MemoryModel], lengths: Sequence[int], batch: int, kv_dtype: str) -> go.Figure:
    series = memory.kv_vs_context(variants, lengths, batch=batch, kv_dtype=kv_dtype)
    return charts.lines(lengths, {label: _gib(values) for label, values in series["bytes"].items()},
                        title=f"KV cache alone vs context, each kind (batch {batch}, {kv_dtype})",
                        x_title="tokens", y_title="GiB", log_x=True, mode="lines+markers")


def weights_by_dtype(model: memory_model.MemoryModel) -> go.Figure:
    weights = {dtype: memory.weight_bytes(model, dtype) / memory.GIB for dtype in memory.weight_dtypes(model)}
    return charts.bars(list(weights), np.array(list(weights.values())), title="Weights by dtype", y_title="GiB")


def memory_by_batch(model: memory_model.MemoryModel, kind: str, lengths: Sequence[int], kv_dtype: str,
                    weight_dtype: str) -> go.Figure:
    batches = list(BATCHES)
    by_batch = memory.kv_vs_batch(model, batches, tokens=min(BATCH_TOKENS, lengths[-1]), kv_dtype=kv_dtype,
                                  weight_dtype=weight_dtype)
    return charts.lines(batches, {"KV cache": _gib(by_batch["kv_bytes"]),
                                  f"weights ({weight_dtype})": np.full(len(batches), by_batch["weight_bytes"] / memory.GIB)},
                        title=f"Memory vs batch at {by_batch['tokens']:,} tokens ({kind})", x_title="batch",
                        y_title="GiB", mode="lines+markers")
