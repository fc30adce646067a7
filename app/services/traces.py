"""A prompt's trace and what the pages read from it: the limits checked first (tokens, then the
estimated memory and time), the model run with a ``progress(layers done, n_layers)`` callback, and the
views built on a trace (the head table, a long map pooled to an overview, readable token labels, the
capture plan the Attention page uses past TXVIZ_MAX_TOKENS)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import torch

from app.services.prompts import PromptError, encode, within_budget
from txviz.threads import threads_for_this_run
from txviz import limits as limits_
from txviz.analysis.heads.metrics import head_table as heads_table, hide_sink, metrics_table
from txviz.capture.cost import CapturePlan
from txviz.capture.maps import MapStorage
from txviz.capture.pooling import pool_attention_rows, pool_maps
from txviz.capture.trace import CaptureError, Trace, trace
from txviz.loading.loaded import LoadedModel
from txviz.model import InputError

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PromptTrace:
    """A prompt's tokens and what the model did with them."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    special: tuple[bool, ...]
    trace: Trace
    seconds: float

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.trace.data.values() if isinstance(t, torch.Tensor))


@dataclass(frozen=True)
class TraceRequest:
    """What to capture of a prompt: the names, the layers (None: all), how maps are stored, and
    whether the long-prompt limit (TXVIZ_MAX_LONG_TOKENS) applies."""

    capture: tuple[str, ...] = ("attn_probs",)
    layers: tuple[int, ...] | None = None
    maps: MapStorage = MapStorage()
    long: bool = False


def check_trace(loaded: LoadedModel, prompt: str, bos: str, request: TraceRequest, settings: limits_.Limits):
    """(encoding, estimate) of a trace the limits allow, or PromptError before anything runs."""
    encoding = encode(loaded, prompt, bos, settings, long=request.long)
    estimate = within_budget(limits_.trace_estimate(
        loaded.config, len(encoding.ids), request.capture, layers=request.layers, maps=request.maps,
        element_bytes=loaded.dtype.itemsize, gflops=settings.gflops), settings)
    return encoding, estimate


def describe_run(n_tokens: int, estimate: limits_.Estimate, settings: limits_.Limits) -> str:
    """What a progress bar or spinner says while the trace runs."""
    return (f"Running the model on {n_tokens:,} tokens (about "
            f"{limits_.format_seconds(estimate.seconds)} at {settings.gflops:g} GFLOP/s)")


def run_trace(loaded: LoadedModel, encoding, request: TraceRequest, progress: Progress | None = None) -> PromptTrace:
    """The model run on an encoding ``check_trace`` accepted; ``progress`` is told after each layer. On
    a loaded machine it runs on one thread (txviz.threads)."""
    started = time.perf_counter()
    try:
        with threads_for_this_run():
            tr = trace(loaded.model, torch.tensor(encoding.ids), capture=request.capture, layers=request.layers,
                       maps=request.maps, progress=progress)
    except InputError as error:  # checked already; kept so no input reaches a page as a traceback
        raise PromptError(str(error)) from None
    return PromptTrace(tuple(encoding.ids), tuple(encoding.tokens), tuple(encoding.offsets),
                       tuple(encoding.special), tr, time.perf_counter() - started)


def attention_plan(loaded: LoadedModel, n_tokens: int, settings: limits_.Limits) -> CapturePlan | None:
    """How the Attention page captures ``n_tokens``: None up to TXVIZ_MAX_TOKENS (every map stored, the
    trace the other pages share); longer, up to TXVIZ_MAX_LONG_TOKENS, the richest capture that fits
    the memory budget (txviz.capture.cost.choose_capture: fp32 maps, fp16 lower triangles, or every
    head's summaries with maps rebuilt from q_rot/k_rot one head at a time)."""
    from txviz.capture.cost import choose_capture

    if n_tokens <= settings.max_prompt_tokens:
        return None
    try:
        return choose_capture(loaded.config, n_tokens, settings.memory_budget_bytes,
                              element_bytes=loaded.dtype.itemsize, weight_bytes=0)
    except CaptureError as error:
        raise PromptError(f"{error} (TXVIZ_MEMORY_BUDGET)") from None


def plan_request(plan: CapturePlan | None) -> TraceRequest:
    """The trace a plan asks for; None is the shared full-map trace."""
    return TraceRequest() if plan is None else TraceRequest(plan.capture, plan.layers, plan.maps, long=True)


def head_table(loaded: LoadedModel, traced: PromptTrace) -> pd.DataFrame:
    """Every head's metrics: from the stored maps, or from the summaries a long trace keeps (equal)."""
    tr = traced.trace
    if "head_summaries" in tr:
        return pd.DataFrame(metrics_table(tr.head_metrics(), tr.layers))
    from txviz.analysis.heads.detectors import unknown_token_ids

    unknown = unknown_token_ids(loaded.tokenizer)  # a repeated <|unk|> is not a repeated word
    with threads_for_this_run():  # reductions over every map: one thread while the machine is oversubscribed
        return pd.DataFrame(heads_table(tr["attn_probs"][:, 0], tr.ids[0], tr.layers, ignore=unknown))


def head_metric_grid(table: pd.DataFrame, metric: str) -> np.ndarray:
    """(layers, heads) of one metric of the head table."""
    return table.pivot(index="layer", columns="head", values=metric).to_numpy()


def map_overview(traced: PromptTrace, layer: int, head: int, hide: bool) -> tuple[np.ndarray, int]:
    """One head's map pooled to at most MAX_MAP_CELLS² cells (block max, txviz.capture.pooling), built a
    band of rows at a time: an 8192² map is never whole."""

    def rows_of(start: int, stop: int) -> torch.Tensor:
        rows = traced.trace.attn(layer, head, rows=slice(start, stop))
        return hide_sink(rows) if hide else rows

    return pool_attention_rows(rows_of, traced.n_tokens, traced.n_tokens)


def display_tokens(loaded: LoadedModel, traced: PromptTrace) -> list[str]:
    """A traced prompt's tokens as a person reads them, for a page's labels: a character that a
    byte-level BPE split over tokens ("\\xf0\\x9f" + "\\x98\\x80") shown whole on the token that ends it
    (txviz.loading.tokenizer.token_text). The trace keeps its own tokens: exported data does not change."""
    from txviz.loading.tokenizer.token_text import readable_tokens

    pieces = [loaded.tokenizer.token_bytes(i) for i in traced.ids]
    return [token.text for token in readable_tokens(pieces, traced.special, traced.tokens)]


def layers_maps(traced: PromptTrace, layers: tuple[int, ...], n_heads: int, hide: bool, *,
                max_cells: int) -> tuple[np.ndarray, int]:
    """Every head's map of ``layers`` as a page draws them, compact: (layers, heads, rows, cols) float16,
    NaN where the causal mask hides the future; every cell up to ``max_cells`` tokens, past that each
    head pooled to at most max_cells² cells (block max, txviz.capture.pooling, as ``map_overview``).
    Returns the maps and the block size (1: every cell). float16 keeps ~3 significant digits.
    Stored maps go through each step as one tensor of every layer asked for, on one torch thread while
    the machine is oversubscribed: 30 layers one by one were 90 small ops (0.7 s at load 8, where each
    OpenMP region waited for a descheduled thread), and torch's float16 cast is ~10× numpy's."""
    n, tr = traced.n_tokens, traced.trace
    with threads_for_this_run():
        if "attn_probs" in tr.data and tr.maps.is_default:  # the stored (L, B, H, T, S) maps: one gather
            index = torch.tensor([tr.layer_index(layer) for layer in layers])
            probs = tr["attn_probs"].index_select(0, index)[:, 0, :n_heads].float()
        else:
            probs = torch.stack([torch.stack([tr.attn(layer, head) for head in range(n_heads)]) for layer in layers]).float()
        probs = hide_sink(probs) if hide else probs
        if n <= max_cells:
            future = torch.ones(n, n, dtype=torch.bool).triu(1)
            return probs.masked_fill(future, float("nan")).half().numpy(), 1
        pooled = [pool_maps(maps, max_cells) for maps in probs]  # every head of a layer in one max-pooling call
        return np.stack([maps.half().numpy() for maps, _ in pooled]), pooled[0][1]

