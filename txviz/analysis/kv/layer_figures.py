"""What each kind of layer keeps, in bytes and in words, where a model's layers differ (sliding beside
global, chunked beside global, linear-attention or state-space beside attention): the figures the
``txviz memory`` report and the calculator show per layer group (txviz.analysis.kv.layer_groups)."""

from __future__ import annotations

from txviz.analysis.kv import memory
from txviz.analysis.kv.memory_model import MemoryModel
from txviz.limits import format_bytes


def group_figures(model: MemoryModel, tokens: int, batch: int = 1, kv_dtype: str = "bf16") -> list[dict]:
    """One dict per layer group: its type, layers, window, layers without positions, the bytes a token adds
    to it (batch of one) while it grows, its bytes at ``tokens`` tokens for ``batch`` sequences, its fixed
    state per sequence, and a sentence saying it."""
    rows = []
    for group in model.layer_groups:
        rate = memory.group_kv_bytes(model, group, 1, 1, kv_dtype) if group.caches_kv else 0
        state = memory.group_kv_bytes(model, group, 1, 1, kv_dtype) if not group.caches_kv else 0
        rows.append({"layer_type": group.kind, "layers": group.layers, "window": group.window,
                     "without_positions": group.positionless, "kv_bytes_per_token": rate,
                     "state_bytes_per_sequence": state,
                     "bytes_at_tokens": memory.group_kv_bytes(model, group, tokens, batch, kv_dtype),
                     "grows": group.grows, "summary": _sentence(model, group, rate, state, kv_dtype)})
    return rows


def _sentence(model: MemoryModel, group, rate: int, state: int, kv_dtype: str) -> str:
    if not group.caches_kv:
        return (f"{group.label} keep no K/V: a fixed {format_bytes(state)} per sequence "
                f"({memory.state_dtype(kv_dtype)})")
    if group.grows:
        return f"{group.label} grow by {format_bytes(rate)} per token"
    cap = memory.group_kv_bytes(model, group, group.window, 1, kv_dtype)
    kept = f"at most one chunk of {group.window:,} tokens" if group.kind == "chunked_attention" else \
        f"the last {group.window:,} tokens"
    return (f"{group.label} keep {kept}: {format_bytes(rate)} per token until then, then no more "
            f"than {format_bytes(cap)}")


def differs(model: MemoryModel) -> bool:
    """Whether the layers differ in what they keep or in positions (one group of RoPE layers does not)."""
    return len(model.layer_groups) > 1 or any(g.positionless for g in model.layer_groups)
