"""The rows and series the Design tradeoffs page shows, built from the formulas of
``txviz.analysis.tradeoffs.formulas`` and the measurements of ``txviz.analysis.tradeoffs.timing``: plain lists and dicts
(a table is a list of row dicts; a chart's series a dict of columns), so the page only lays them out."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import torch

from txviz.analysis.kv.memory import token_kv_bytes, token_kv_bytes_past_windows
from txviz.analysis.kv.memory_model import kind_variants
from txviz.analysis.tradeoffs.timing import AttentionTiming, SequenceTiming
from txviz.analysis.tradeoffs.formulas import REFERENCES
from txviz.analysis.tradeoffs.noise import LossEstimate, loss_estimate, paired_difference
from txviz.config import ModelConfig
from txviz.model.counts import count_active_params, count_params, flops_per_token

MIB = 2 ** 20


def powers_of_two(low: int, high: int) -> list[int]:
    """The powers of two from ``low`` to ``high`` (both rounded down to one)."""
    return [2 ** e for e in range(int(math.log2(low)), int(math.log2(high)) + 1)]


def kv_dtype_name(itemsize: int) -> str:
    """The name of a cache dtype of ``itemsize`` bytes as the memory formulas spell it (fp32 unless bf16)."""
    return {4: "fp32", 2: "bf16"}.get(itemsize, "fp32")


def depths_around(n_layers: int, extra: Sequence[int] = ()) -> list[int]:
    """Depths to compare at equal budget: a quarter, half, 1×, 2× and 4× ``n_layers``, plus ``extra``."""
    return sorted({max(1, n_layers // 4), max(1, n_layers // 2), n_layers, 2 * n_layers, 4 * n_layers} | set(extra))


# ---- the zoo's rows -----------------------------------------------------------------------------------
def trained_table(rows: Sequence[dict], columns: Mapping[str, str]) -> list[dict]:
    """The trained zoo rows, each with ``columns`` (row key → shown name) only, renamed."""
    return [{label: row[key] for key, label in columns.items()} for row in rows if row["trained"]]


def missing_variants(rows: Sequence[dict]) -> list[str]:
    """The variants of ``rows`` the zoo has not trained yet."""
    return [row["variant"] for row in rows if not row["trained"]]


def loss_noise(window_losses: Mapping[str, torch.Tensor]
               ) -> tuple[list[LossEstimate], dict[tuple[str, str], tuple[float, float]]]:
    """Each variant's loss with its standard error, and every ordered pair's paired difference, from
    the per-window losses {variant: (W,)} (the input of ``tradeoffs.noise_finding``)."""
    estimates = [loss_estimate(name, losses) for name, losses in window_losses.items()]
    paired = {(a, b): paired_difference(window_losses[a], window_losses[b])
              for a in window_losses for b in window_losses if a != b}
    return estimates, paired


# ---- formulas on configs ----------------------------------------------------------------------------
def reference_rows(context: int = 4096) -> list[dict]:
    """Mistral 7B and Mixtral 8×7B: parameters, active parameters and FLOPs per token at ``context`` keys."""
    return [{"model": c.name, "total params": count_params(c), "active params": count_active_params(c),
             f"FLOPs/token ({context // 1024}k context)": flops_per_token(c, context), "source": c.source}
            for c in REFERENCES.values()]


def sparse_over_dense(dense: ModelConfig, sparse: ModelConfig, context: int = 4096) -> tuple[float, float]:
    """(parameters ratio, FLOPs per token ratio) of a MoE over the dense model it was made from."""
    return (count_params(sparse) / count_params(dense),
            flops_per_token(sparse, context) / flops_per_token(dense, context))


def attention_kind_rows(config, dtype: str) -> list[dict]:
    """The model (a ModelConfig or a MemoryModel) as MHA, GQA and MQA: KV heads, parameters (the K/V
    projections follow the heads), the window, and KV bytes per token in ``dtype`` while the windows fill
    and past them; ValueError where the kinds do not apply (an MLA cache)."""
    rows = []
    for kind, model in kind_variants(config).items():
        window = "; ".join(f"{'chunks of ' * (g.kind == 'chunked_attention')}{g.window:,} on {g.layers} of "
                           f"{model.n_layers} layers" for g in model.layer_groups if g.caches_kv and g.window) or "none"
        rows.append({"kind": kind, "KV heads": model.kv_heads, "params": model.n_params, "window": window,
                     f"KV bytes/token ({dtype})": token_kv_bytes(model, dtype),
                     f"KV bytes/token past the window ({dtype})": token_kv_bytes_past_windows(model, dtype)})
    return rows


def context_memory_mib(config: ModelConfig, lengths: Sequence[int], score_bytes: Sequence[int],
                       dtype: str) -> dict[str, list[float]]:
    """Memory over each of ``lengths`` tokens (batch 1), in MiB: one layer's score matrix (``score_bytes``,
    from ``tradeoffs.context_costs``) and the KV cache of all layers in ``dtype``."""
    per_token = token_kv_bytes(config, dtype)
    return {"one layer's score matrix": [n / MIB for n in score_bytes],
            "KV cache, all layers": [per_token * tokens / MIB for tokens in lengths]}


def extrapolation_table(rows: Sequence[dict]) -> list[dict]:
    """The trained rows of ``tradeoffs.extrapolation_rows`` as a table (without the ``trained`` flag)."""
    return [{k: v for k, v in row.items() if k != "trained"} for row in rows if row["trained"]]


# ---- measurements on this machine -------------------------------------------------------------------
def benchmark_table(result: Sequence[AttentionTiming]) -> dict[str, list]:
    """Naive attention against SDPA, as columns: times in ms, peaks in MiB (None where naive was skipped)."""
    def ms_or_none(seconds):
        return None if seconds is None else seconds * 1e3

    def mib_or_none(nbytes):
        return None if nbytes is None else nbytes / MIB

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.0f}" if seconds >= 0.1 else f"{seconds * 1e3:.3g}"

    def runs_range(runs):
        return f"{ms(min(runs))}–{ms(max(runs))}" if runs else None

    return {"tokens": [r.tokens for r in result], "naive ms": [ms_or_none(r.naive_s) for r in result],
            "naive fastest–slowest ms": [runs_range(r.naive_runs) for r in result],
            "SDPA ms": [r.sdpa_s * 1e3 for r in result],
            "SDPA fastest–slowest ms": [runs_range(r.sdpa_runs) for r in result],
            "speedup": [r.speedup for r in result],
            "noise decides": [r.noise_decides for r in result],
            "naive peak MiB": [mib_or_none(r.naive_peak_bytes) for r in result],
            "SDPA peak MiB": [r.sdpa_peak_bytes / MIB for r in result],
            "one score matrix MiB (analytic)": [r.score_matrix_bytes / MIB for r in result],
            "max |naive − SDPA|": [r.max_abs_diff for r in result]}


def noise_notes(result: Sequence[AttentionTiming]) -> list[str]:
    """Where the runs' spread, not the method or the length, decides a comparison: a length where naive and
    SDPA's runs overlap, and a longer length whose runs reach below the shorter one's (a time that went down
    as the work grew)."""
    notes = [f"at {r.tokens:,} tokens naive and SDPA's runs overlap: noise decides which is faster"
             for r in result if r.noise_decides]
    for method, runs in (("naive", lambda r: r.naive_runs), ("SDPA", lambda r: r.sdpa_runs)):
        for short, long in zip(result, result[1:]):
            if runs(short) and runs(long) and min(runs(long)) <= max(runs(short)):
                notes.append(f"{method} at {long.tokens:,} tokens has a run as fast as one at {short.tokens:,}: "
                             "the difference between these two lengths is within the noise")
    return notes


def reading_lengths(cap: int) -> list[int]:
    """The sequence lengths offered for reading token by token, up to ``cap`` (at least ``cap`` itself)."""
    return [t for t in (16, 32, 64, 128, 256, 512) if t <= cap] or [cap]


def reading_table(result: Sequence[SequenceTiming]) -> dict[str, list]:
    """One parallel pass against one token at a time, as columns (seconds, the logits' gap, the ratio)."""
    return {"tokens": [r.tokens for r in result], "parallel_s": [r.parallel_s for r in result],
            "sequential_s": [r.sequential_s for r in result], "max |Δ last logits|": [r.max_abs_diff for r in result],
            "sequential ÷ parallel": [r.ratio for r in result]}


def reading_times_ms(result: Sequence[SequenceTiming]) -> dict[str, list[float]]:
    """The two readings' times in ms, named as the chart shows them."""
    return {"one parallel pass": [r.parallel_s * 1e3 for r in result],
            "one token at a time (KV cache)": [r.sequential_s * 1e3 for r in result]}
