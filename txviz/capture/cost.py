"""What a capture request would store and roughly cost, before the model runs; and the request that
fits a byte budget.

    cost = capture_cost(config, 8192, SUMMARY_CAPTURE)   # bytes kept, peak temporaries, FLOPs
    plan = choose_capture(config, 8192, budget_bytes=2 * 2**30)
    tr = trace(model, ids, capture=plan.capture, layers=plan.layers, maps=plan.maps)

Sizes follow the shapes documented in txviz.capture.trace.CAPTURES for one sequence (B = 1). The
attention path is the model's own choice (``txviz.model.attention.attention_path``): whole logits or
scores (eager) hold 3 H×T×T matrices per layer while it runs; maps and summaries (blockwise) hold a
few blocks of ``BLOCK_ELEMENTS`` scores plus the token patterns shared by all layers; otherwise the
fused kernel holds O(T). FLOPs count the matrix products only (2 per multiply-add), which is what bounds the
time on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import torch

from txviz.config import ModelConfig
from txviz.capture.summaries import METRICS
from txviz.capture.maps import MapStorage
from txviz.model.attention import attention_path, block_budget
from txviz.capture.trace import CAPTURES, SUMMARY_CAPTURE, CaptureError

@dataclass(frozen=True)
class CaptureCost:
    """Bytes a trace would keep per capture name, the largest temporaries while it runs, and FLOPs."""

    n_tokens: int
    path: str  # "eager" (whole logits or scores), "blockwise" (maps, summaries) or "fused"
    stored: dict[str, int] = field(default_factory=dict)
    transient_bytes: int = 0
    weight_bytes: int = 0
    flops: float = 0.0

    @property
    def stored_bytes(self) -> int:
        return sum(self.stored.values())

    @property
    def peak_bytes(self) -> int:
        """Weights + what is kept + the temporaries of one layer: a rough upper bound of the process's
        extra memory for this call."""
        return self.weight_bytes + self.stored_bytes + self.transient_bytes

    def seconds(self, gflops: float) -> float:
        """A rough time at a sustained ``gflops`` (measure it once: ``flops / seconds`` of a run)."""
        return self.flops / (gflops * 1e9)


def capture_cost(config: ModelConfig, n_tokens: int, capture: Iterable[str], *, layers: Iterable[int] | None = None,
                 maps: MapStorage = MapStorage(), element_bytes: int = 4, weight_bytes: int = 0) -> CaptureCost:
    """Estimate ``trace(model, ids[:n_tokens], capture, layers=layers, maps=maps)`` on a model with
    ``config`` and ``element_bytes`` per activation (4 for fp32). Pass the model's ``weight_bytes``
    to have them in ``peak_bytes``."""
    names = tuple(capture)
    unknown = set(names) - set(CAPTURES)
    if unknown:
        raise CaptureError(f"unknown capture names {sorted(unknown)}; known: {sorted(CAPTURES)}")
    chosen = set(range(config.n_layers)) if layers is None else set(layers)
    n_layers = len(chosen)
    per_name = _bytes_per_name(config, n_tokens, element_bytes, maps)
    layer_names = {n for n in names if n in _LAYER_SCOPED}
    if not all(config.is_moe_layer(i) for i in chosen):  # a dense layer offers no routing: a trace keeps none
        per_name = {n: 0 if n in _ROUTER_SCOPED else size for n, size in per_name.items()}
    stored = {n: per_name[n] * (n_layers if n in layer_names else 1) for n in names if per_name.get(n)}
    path = attention_path(names, softcapped=config.attn_softcap is not None, map_blocks=True)  # trace's recorder
    return CaptureCost(n_tokens=n_tokens, path=path, stored=stored, weight_bytes=weight_bytes,
                       transient_bytes=_transient_bytes(config, n_tokens, path, element_bytes, "logits" in names),
                       flops=_flops(config, n_tokens, full_logits="logits" in names))


_LAYER_SCOPED = {"q", "k", "v", "q_rot", "k_rot", "attn_logits", "attn_scores", "attn_probs", "attn_sink", "head_summaries",
                 "kv_bytes", "attn_out", "ffn_out", "router_logits", "router_probs", "expert_ids", "expert_gates",
                 "shared_expert_gate"}
_ROUTER_SCOPED = {"router_logits", "router_probs", "expert_ids", "expert_gates", "shared_expert_gate"}


def _bytes_per_name(c: ModelConfig, t: int, e: int, maps: MapStorage) -> dict[str, int]:
    h, h_kv, d, width = c.n_heads, c.n_kv_heads, c.head_dim, c.d_model
    experts, top_k = (c.n_experts, c.top_k) if c.is_moe else (0, 0)  # no router captures without experts
    rope = c.positions == "rope"
    local_rope = rope and c.rope_local_theta is not None and any(w is not None for w in c.layer_windows)
    return {
        "q": h * t * d * e, "q_rot": h * t * d * e, "k": h_kv * t * d * e, "k_rot": h_kv * t * d * e,
        "v": h_kv * t * d * e, "attn_logits": h * t * t * e, "attn_scores": h * t * t * e,
        "attn_probs": h * maps.bytes_per_map(t, t, e), "head_summaries": h * t * len(METRICS) * 4,
        "attn_sink": c.attn_sinks * h * t * 4,
        "kv_bytes": 8, "attn_out": t * width * e, "ffn_out": t * width * e,
        "router_logits": t * experts * e, "router_probs": t * experts * e, "expert_ids": t * top_k * 8,
        "expert_gates": t * top_k * e, "resid": (c.n_layers + 1) * t * width * e, "resid_norm": (c.n_layers + 1) * t * 4,
        "shared_expert_gate": t * e * (c.is_moe and c.shared_expert_gate),
        "positions": t * 8, "rope_angles": rope * t * d // 2 * 4, "rope_cos": rope * t * d * e, "rope_sin": rope * t * d * e,
        "rope_local_angles": local_rope * t * d // 2 * 4, "rope_local_cos": local_rope * t * d * e,
        "rope_local_sin": local_rope * t * d * e,
        "alibi_bias": h * t * t * 4 if c.positions == "alibi" else 0, "logits": t * c.vocab_size * e,
    }


def _transient_bytes(c: ModelConfig, t: int, path: str, e: int, full_logits: bool) -> int:
    activations = t * (4 * c.d_model + 3 * c.ffn_hidden) * e  # residual, norms, q/k/v, FFN hidden
    logits = (t if full_logits else 1) * c.vocab_size * e
    windowed = any(w is not None for w in c.layer_windows)
    mask = 0 if c.positions != "alibi" and not windowed else c.n_heads * t * t * 4
    attention = {
        "eager": 3 * c.n_heads * t * t * e,  # logits, scores, probabilities of one layer
        # the layer's two block buffers and the recorder's temporaries (a block holds at least MIN_BLOCK_ROWS
        # rows of every key), + duplicate/induction patterns (at most two bools per cell)
        "blockwise": 4 * max(block_budget()[0], c.n_heads * block_budget()[1] * t) * 4 + 2 * t * (t + 1) // 2,
        "fused": 0,
    }[path]
    return activations + logits + mask + attention


def _flops(c: ModelConfig, t: int, *, full_logits: bool) -> float:
    h, h_kv, d = c.n_heads, c.n_kv_heads, c.head_dim
    attention_params = c.d_model * d * (2 * h + 2 * h_kv)
    ffn_params = (2 if c.ffn == "gelu_mlp" else 3) * c.d_model * c.ffn_hidden * (c.top_k if c.is_moe else 1)
    visible = sum(_visible_pairs(t, window) for window in c.layer_windows)  # each layer its own window
    projections = c.n_layers * 2 * t * (attention_params + ffn_params)
    return projections + 2 * 2 * h * d * visible + 2 * (t if full_logits else 1) * c.d_model * c.vocab_size


def _visible_pairs(t: int, window: int | None) -> int:
    """(query, key) pairs a causal mask lets through: T(T+1)/2, fewer with a sliding window W."""
    if window is None or window >= t:
        return t * (t + 1) // 2
    return window * (window + 1) // 2 + (t - window) * window


@dataclass(frozen=True)
class CapturePlan:
    """A capture request that fits a budget, with its estimated cost and why it was chosen."""

    capture: tuple[str, ...]
    maps: MapStorage
    layers: tuple[int, ...] | None
    cost: CaptureCost
    reason: str


def choose_capture(config: ModelConfig, n_tokens: int, budget_bytes: int, *, element_bytes: int = 4,
                   weight_bytes: int = 0) -> CapturePlan:
    """The richest request whose ``peak_bytes`` fits ``budget_bytes``. Every plan has every head's
    ``head_summaries``; the maps come, in order of preference, as stored fp32 maps (any head shown
    instantly), stored fp16 lower triangles (half the bytes of the causal half), or not stored but
    rebuilt on demand from q_rot/k_rot (all layers, else as many leading layers as fit)."""
    compact = MapStorage(dtype=torch.float16, lower_triangle=True)
    ladder = [
        (("attn_probs", "head_summaries"), MapStorage(), None, "all maps stored in fp32"),
        (("attn_probs", "head_summaries"), compact, None, "all maps stored as fp16 lower triangles"),
        (SUMMARY_CAPTURE, MapStorage(), None, "summaries of every head; maps rebuilt on demand from q_rot/k_rot"),
    ]
    for capture, maps, layers, reason in ladder:
        cost = capture_cost(config, n_tokens, capture, layers=layers, maps=maps, element_bytes=element_bytes,
                            weight_bytes=weight_bytes)
        if cost.peak_bytes <= budget_bytes:
            return CapturePlan(capture, maps, layers, cost, reason)
    for n_layers in range(config.n_layers - 1, 0, -1):
        layers = tuple(range(n_layers))
        cost = capture_cost(config, n_tokens, SUMMARY_CAPTURE, layers=layers, element_bytes=element_bytes,
                            weight_bytes=weight_bytes)
        if cost.peak_bytes <= budget_bytes:
            return CapturePlan(SUMMARY_CAPTURE, MapStorage(), layers, cost,
                               f"summaries and rebuildable maps of layers 0–{n_layers - 1} only")
    raise CaptureError(f"nothing fits {budget_bytes / 2**20:.0f} MiB at {n_tokens} tokens: even one layer's "
                       "summaries need more; shorten the prompt or raise the budget")
