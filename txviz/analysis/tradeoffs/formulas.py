"""Design tradeoffs, each as a formula on any ModelConfig; what the lab's zoo of tiny trained variants
measured is read by ``txviz.analysis.tradeoffs.zoo_results``, and how far its losses can be trusted by
``txviz.analysis.tradeoffs.noise``.

(a) depth vs width: configs of equal non-embedding parameters (Kaplan et al. 2020's N) at several
    depths, with their FLOPs and KV bytes per token.
(b) dense vs MoE: total parameters (capacity, memory) against FLOPs per token as experts are added;
    Mistral 7B against Mixtral 8×7B.
(c) MHA vs GQA vs MQA: KV bytes per token (txviz.analysis.kv.memory).
(d) context length: per layer, naive attention does 4·H·D·T² FLOPs (QKᵀ and A·V over the whole T×T
    matrix) and holds H·T² scores, while the FFN does T·F (F its FLOPs per token), so attention
    overtakes the FFN at T* = F / (4·H·D); a kernel that skips the masked half moves it to ≈ 2·T*.
    A layer with a window W compares each query with at most W keys; with such layers beside global
    ones (Gemma 2/3), T* is where the mean over layers crosses, solved numerically.
(e) FlashAttention vs naive attention and (f) parallel vs one-token-at-a-time reading are measured
    on this machine: txviz.analysis.tradeoffs.timing.

FLOPs and parameters come from txviz.model.counts, so dense and MoE configs are handled alike.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from txviz.analysis.kv.memory import token_kv_bytes
from txviz.config import ModelConfig
from txviz.model.counts import (count_active_params, count_params, ffn_flops_per_token, flops_per_token,
                                non_embedding_params, projection_flops_per_token)

_MISTRAL = dict(vocab_size=32000, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_hidden=14336,
                max_seq_len=32768)
REFERENCES = {
    "mistral-7b": ModelConfig(**_MISTRAL, sliding_window=4096, name="Mistral 7B",
                              source="mistralai/Mistral-7B-v0.1 config.json (Jiang et al. 2023)"),
    "mixtral-8x7b": ModelConfig(**_MISTRAL, n_experts=8, top_k=2, rope_theta=1e6, name="Mixtral 8×7B",
                                source="mistralai/Mixtral-8x7B-v0.1 config.json (Jiang et al. 2024)"),
}


# ---- (a) depth vs width ---------------------------------------------------------------------------
def _reshaped(config: ModelConfig, n_layers: int, d_model: int, ffn_hidden: int) -> ModelConfig:
    return config.replace(n_layers=n_layers, d_model=d_model, ffn_hidden=max(1, ffn_hidden), head_dim=None,
                          layer_types=layer_pattern(config.layer_types, n_layers),
                          dense_layers=_dense_layers(config, n_layers), name=f"{n_layers} layers × d {d_model}")


def _dense_layers(config: ModelConfig, n_layers: int) -> tuple[int, ...]:
    """A MoE model's dense layers (Qwen-MoE's) at another depth, by the same repeated pattern."""
    if not config.dense_layers:
        return ()
    kinds = layer_pattern(tuple("dense" if i in config.dense_layers else "moe" for i in range(config.n_layers)),
                          n_layers)
    return tuple(i for i, kind in enumerate(kinds) if kind == "dense")


def layer_pattern(layer_types: tuple[str, ...] | None, n_layers: int) -> tuple[str, ...] | None:
    """A per-layer pattern (Gemma 3: five sliding layers, then one full) at another depth: its shortest
    period repeated, as transformers' configs derive ``layer_types`` from ``sliding_window_pattern``
    for any number of layers (so 4 layers of Gemma 3 are all local, as they would be there)."""
    if layer_types is None:
        return None
    period = next(p for p in range(1, len(layer_types) + 1)
                  if all(kind == layer_types[i % p] for i, kind in enumerate(layer_types)))
    return tuple(layer_types[i % period] for i in range(n_layers))


def _width_step(config: ModelConfig) -> int:
    """d_model must split into n_heads heads, of even width under RoPE."""
    return config.n_heads * (2 if config.positions == "rope" else 1)


def equal_budget_shapes(config: ModelConfig, depths: Iterable[int], budget: int | None = None) -> list[ModelConfig]:
    """For each depth, the config with that many layers whose non-embedding parameters are nearest
    ``budget`` (default: ``config``'s): heads, KV heads and vocabulary kept, head_dim = d_model/n_heads,
    d_model on the grid of whole heads with the FFN ratio kept, then ffn_hidden fine-tuned to the budget."""
    budget = non_embedding_params(config) if budget is None else budget
    ratio, step = config.ffn_hidden / config.d_model, _width_step(config)
    shapes = []
    for n_layers in depths:
        best, d_model = None, step
        while True:
            candidate = _reshaped(config, n_layers, d_model, round(ratio * d_model))
            error = abs(non_embedding_params(candidate) - budget)
            if best is None or error < best[0]:
                best = (error, candidate)
            if non_embedding_params(candidate) > budget:
                break
            d_model += step
        shapes.append(_fit_ffn(best[1], budget))
    return shapes


def _fit_ffn(config: ModelConfig, budget: int) -> ModelConfig:
    """Parameters are affine in ffn_hidden: solve for the width that meets the budget. A MoE whose
    experts have a width of their own (``expert_hidden``) and no dense layer does not use ffn_hidden at
    all: it is kept as the width search left it."""
    at_one = non_embedding_params(config.replace(ffn_hidden=1))
    per_unit = non_embedding_params(config.replace(ffn_hidden=2)) - at_one
    if not per_unit:
        return config
    return config.replace(ffn_hidden=max(1, round(1 + (budget - at_one) / per_unit)))


def shape_rows(configs: Sequence[ModelConfig], *, context: int = 0, kv_dtype: str = "bf16") -> list[dict]:
    """Parameters, FLOPs per token (attending ``context`` keys) and KV bytes per token of each config."""
    return [{"name": c.name, "n_layers": c.n_layers, "d_model": c.d_model, "ffn_hidden": c.ffn_hidden,
             "head_dim": c.head_dim, "params": count_params(c), "non_embedding_params": non_embedding_params(c),
             "flops_per_token": flops_per_token(c, context), "kv_bytes_per_token": token_kv_bytes(c, kv_dtype)}
            for c in configs]


# ---- (b) dense vs MoE -----------------------------------------------------------------------------
def expert_family(config: ModelConfig, expert_counts: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), *,
                  top_k: int | None = None, context: int = 0) -> list[dict]:
    """The config with its FFN split into E experts of the same width (E = 1: dense), top-k routed:
    capacity grows with E, FLOPs per token only with k."""
    k = top_k or (config.top_k if config.is_moe else 2)
    rows = []
    for experts in expert_counts:
        variant = config.replace(n_experts=0) if experts == 1 else \
            config.replace(n_experts=experts, top_k=min(k, experts))
        rows.append({"experts": experts, "top_k": variant.top_k if variant.is_moe else 1,
                     "total_params": count_params(variant), "active_params": count_active_params(variant),
                     "flops_per_token": flops_per_token(variant, context)})
    return rows


# ---- (d) context length vs quadratic attention ----------------------------------------------------
def attention_flops(config: ModelConfig, tokens: int, *, causal_skip: bool = False) -> int:
    """One layer's QKᵀ and A·V over T tokens: 4·H·D·T² for the full matrix (naive), or over the
    T(T+1)/2 visible pairs only (``causal_skip``); a sliding window caps the keys per query. With
    layers of different windows (Gemma 2/3), the mean over layers."""
    hd = config.n_heads * config.head_dim
    return 4 * hd * sum(_pairs(tokens, w or tokens, causal_skip) for w in config.layer_windows) // config.n_layers


def _pairs(tokens: int, window: int, causal_skip: bool) -> int:
    if causal_skip:  # query t sees min(t, W) keys: Σ_t min(t, W)
        seen = min(tokens, window)
        return seen * (seen + 1) // 2 + (tokens - seen) * window
    return tokens * min(tokens, window)


def context_costs(config: ModelConfig, lengths: Sequence[int], *, element_bytes: int = 4,
                  causal_skip: bool = False) -> dict[str, list]:
    """Per layer, for a forward pass over each T: attention, FFN and projection FLOPs, and the bytes of
    one H×T×T score matrix (batch 1) that naive attention materializes."""
    return {"tokens": list(lengths),
            "attention_flops": [attention_flops(config, t, causal_skip=causal_skip) for t in lengths],
            "ffn_flops": [t * ffn_flops_per_token(config) for t in lengths],
            "projection_flops": [t * projection_flops_per_token(config) for t in lengths],
            "score_bytes": [config.n_heads * t * t * element_bytes for t in lengths]}


def _mean_keys_per_query(config: ModelConfig, tokens: float, causal_skip: bool) -> float:
    """Keys one query is compared with, averaged over the T queries and the layers: attention_flops
    / (4·H·D·T), continuous in T so that the crossover can be solved for between whole tokens."""
    total = 0.0
    for window in config.layer_windows:
        w = tokens if window is None else min(window, tokens)
        if causal_skip:  # Σ_t min(t, W) / T = (T+1)/2 inside the window, W − W(W−1)/(2T) past it
            total += (tokens + 1) / 2 if w == tokens else w - w * (w - 1) / (2 * tokens)
        else:
            total += w
    return total / config.n_layers


def attention_ffn_crossover(config: ModelConfig, *, causal_skip: bool = False) -> float | None:
    """The T at which attention_flops (the mean over layers, each capped by its window) equals the FFN's
    T·F: F / (4·H·D) when every layer is global, 2·F / (4·H·D) − 1 when the masked half is skipped.
    Layers whose window W keeps 4·H·D·W below F never get there, so with some windowed layers
    (Gemma 3: 15 of 18 at 512) the global ones must carry the whole excess and T* moves right.
    None when attention stays below the FFN for ever (every layer windowed)."""
    per_key, ffn = 4 * config.n_heads * config.head_dim, ffn_flops_per_token(config)

    def excess(tokens: float) -> float:
        return per_key * _mean_keys_per_query(config, tokens, causal_skip) - ffn

    windows = config.layer_windows
    if all(w is not None for w in windows) and per_key * sum(windows) / len(windows) <= ffn:
        return None  # every layer capped: the mean approaches Σ W / L from below
    low, high = 1.0, 2.0
    while excess(high) < 0:
        low, high = high, 2 * high
    for _ in range(100):  # bisection: the mean keys per query only grow with T
        middle = (low + high) / 2
        low, high = (middle, high) if excess(middle) < 0 else (low, middle)
    return high


def global_layer_crossover(config: ModelConfig, *, causal_skip: bool = False) -> float:
    """T* of one global (full-attention) layer alone: F / (4·H·D), or 2·F / (4·H·D) − 1 skipping the
    masked half. With windowed layers beside it, the model's T* (attention_ffn_crossover) is larger."""
    return attention_ffn_crossover(config.replace(sliding_window=None, layer_types=None), causal_skip=causal_skip)


def windowed_layers(config: ModelConfig) -> dict[int, int]:
    """{window: number of layers} of the layers that see only a window of keys."""
    counts: dict[int, int] = {}
    for window in config.layer_windows:
        if window is not None:
            counts[window] = counts.get(window, 0) + 1
    return counts
