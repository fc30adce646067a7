"""Attention maps at scale: how stored maps are kept, and how any map is rebuilt from q and k.

All maps of a model grow as layers × heads × T² (30 × 9 × 8192² fp32 = 72 GB for SmolLM2 at its full
context), so a trace can keep them in a smaller form or not at all:

* ``MapStorage``: keep ``attn_probs`` in fp16 and/or only the lower triangle (a causal map is zero
  above the diagonal), row-major packed: row i holds keys 0..i at offset i(i+1)/2.
* ``AttentionRecipe`` + ``rebuild_attention``: keep only the rotated queries and keys (O(T·D) per
  head) and recompute any head's map, or any band of its rows, on demand, with the same operations
  the eager path runs (QKᵀ·scale, the soft cap if any, the same mask built by ``AttentionContext``
  with the layer's own window, softmax in fp32).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from txviz.model.attention import AttentionContext
from txviz.model.sinks import softmax_with_sink
from txviz.model.softcap import make_softcap


def _tril_offset(row: int) -> int:
    return row * (row + 1) // 2


@dataclass(frozen=True)
class MapStorage:
    """How ``attn_probs`` is kept: ``dtype`` None keeps the model's dtype; ``lower_triangle`` packs
    each (T, T) map into its T(T+1)/2 causal entries (for maps without a cache, S == T)."""

    dtype: torch.dtype | None = None
    lower_triangle: bool = False

    @property
    def is_default(self) -> bool:
        return self.dtype is None and not self.lower_triangle

    def bytes_per_map(self, t: int, s: int, model_bytes: int = 4) -> int:
        element = torch.finfo(self.dtype).bits // 8 if self.dtype is not None else model_bytes
        return element * (_tril_offset(t) if self.lower_triangle else t * s)

    def store(self, probs: torch.Tensor) -> torch.Tensor:
        """(..., T, S) → what is kept: (..., T, S) or packed (..., T(T+1)/2), in ``dtype``."""
        if self.dtype is not None:
            probs = probs.to(self.dtype)
        if not self.lower_triangle:
            return probs
        t, s = probs.shape[-2:]
        if t != s:
            raise ValueError(f"lower-triangle storage needs square maps (no KV cache), got {t}×{s}")
        below = torch.ones(t, t, dtype=torch.bool, device=probs.device).tril()
        return probs[..., below]  # boolean indexing walks the rows in order: the packed layout

    def stored_shape(self, batch_heads: tuple[int, ...], t: int, s: int) -> tuple[int, ...]:
        """The shape ``store`` gives the (..., T, S) maps of one layer."""
        if self.lower_triangle and t != s:
            raise ValueError(f"lower-triangle storage needs square maps (no KV cache), got {t}×{s}")
        return (*batch_heads, _tril_offset(t)) if self.lower_triangle else (*batch_heads, t, s)

    def write_rows(self, stored: torch.Tensor, rows: slice, keys: slice, weights: torch.Tensor,
                   indices: dict | None = None) -> None:
        """Rows ``rows`` of one layer's maps, ``weights`` (B, H, R, K) over keys ``keys`` (every other key
        has weight 0, as the mask gives it), written into ``stored`` (B, H, T, S) or packed (B, H, T(T+1)/2)
        in place: what ``store`` keeps of the whole (B, H, T, S), value for value, without the whole
        ever existing. ``indices`` caches the packing's gather indices per block, across layers."""
        if not self.lower_triangle:
            stored[:, :, rows, :keys.start].zero_()
            stored[:, :, rows, keys].copy_(weights)
            stored[:, :, rows, keys.stop:].zero_()
            return
        b, h, n, width = weights.shape
        key = (rows.start, rows.stop, keys.start, keys.stop, weights.device)
        cache = {} if indices is None else indices
        if key not in cache:
            cache[key] = _packing(rows, keys, width, weights.device)
        source, target = cache[key]
        region = stored[..., _tril_offset(rows.start):_tril_offset(rows.stop)]  # (B, H, packed rows)
        packed = weights.reshape(b * h, n * width).index_select(1, source).view(b, h, -1)
        if target is None:
            region.copy_(packed)
        else:  # keys before keys.start (beyond a sliding window) are 0
            region.zero_()
            region[..., target] = packed.to(region.dtype)

    def rows(self, stored: torch.Tensor, n_keys: int, rows: slice = slice(None)) -> torch.Tensor:
        """One stored map (T, S) or (T(T+1)/2,) → rows ``rows`` as a dense (R, S) fp32 tensor."""
        if not self.lower_triangle:
            return stored[rows].float()
        start, stop, _ = rows.indices(n_keys)
        band = stored[_tril_offset(start):_tril_offset(stop)].float()
        out = torch.zeros(stop - start, n_keys, dtype=torch.float32)
        below = torch.arange(n_keys)[None, :] <= torch.arange(start, stop)[:, None]
        out[below] = band
        return out


def _packing(rows: slice, keys: slice, width: int, device) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Where each packed entry of rows ``rows`` (row i: keys 0..i) comes from in a block of weights
    flattened to (R·width,) over keys ``keys``; and, when the keys start after 0, where the entries
    the block holds go in the packed rows (else None: all of them, in order)."""
    positions = torch.arange(rows.start, rows.stop, device=device)
    held = positions + 1 - keys.start  # keys keys.start..i of row i are in the block
    local_row = torch.repeat_interleave(torch.arange(len(positions), device=device), held)
    starts = torch.cumsum(held, 0) - held  # where each row's run begins among the held entries
    column = torch.arange(int(held.sum()), device=device) - torch.repeat_interleave(starts, held)  # j − keys.start
    source = local_row * width + column
    if keys.start == 0:
        return source, None
    row_offsets = positions * (positions + 1) // 2 - _tril_offset(rows.start)
    return source, torch.repeat_interleave(row_offsets, held) + column + keys.start


@dataclass(frozen=True)
class AttentionRecipe:
    """What turns captured ``q_rot``/``k_rot`` back into attention weights: the layers' scale and score
    cap, the GQA grouping, the positions of queries and keys, each layer's window (None: full), and
    the model's positions module (for ALiBi's bias; RoPE is already inside q_rot and k_rot)."""

    scale: float
    n_groups: int
    q_pos: torch.Tensor  # (T,)
    k_pos: torch.Tensor  # (S,)
    windows: tuple[int | None, ...]  # per layer
    positions: torch.nn.Module
    softcap: float | None = None
    sinks: torch.Tensor | None = None  # (L, H) each layer's learned sink logits (txviz.model.sinks), or None

    @classmethod
    def of(cls, model, q_pos: torch.Tensor) -> "AttentionRecipe":
        """The recipe for a call of ``model`` on one sequence without a cache (as ``trace`` runs it)."""
        attention = model.layers[0].attn
        sinks = (torch.stack([layer.attn.sinks.detach().float().cpu() for layer in model.layers])
                 if model.config.attn_sinks else None)
        return cls(scale=attention.scale, n_groups=attention.n_groups, q_pos=q_pos.cpu(), k_pos=q_pos.cpu(),
                   windows=model.config.layer_windows, positions=model.positions,
                   softcap=model.config.attn_softcap, sinks=sinks)

    def softmax(self, scores: torch.Tensor, layer: int, head: int) -> torch.Tensor:
        """The weights over the real keys of one head's masked scores (R, S), as its layer computes them."""
        if self.sinks is None:
            return F.softmax(scores, dim=-1, dtype=torch.float32)
        return softmax_with_sink(scores.float()[None], self.sinks[layer, head, None])[0][0]

    def mask_rows(self, rows: slice, head: int, dtype: torch.dtype, layer: int = 0) -> torch.Tensor:
        """The additive mask (R, S) of one head's rows in ``layer``, built by the model's own ``AttentionContext``."""
        ctx = AttentionContext(self.positions, self.q_pos[rows], self.k_pos, self.windows[layer], dtype)
        mask = ctx.causal_mask(dtype)  # (1|H, R, S)
        return mask[head if mask.shape[0] > 1 else 0]


REBUILD_BAND_ROWS = 512  # rows recomputed at once: a whole 8192² map never needs more than its own bytes


def rebuild_attention(trace, layer: int, head: int, rows: slice = slice(None), batch: int = 0) -> torch.Tensor:
    """Attention weights (R, S) of one head's query rows, recomputed from the trace's ``q_rot`` and
    ``k_rot``: softmax(q kᵀ·scale + M) exactly as the eager path computes them, a band of rows at a
    time. Rebuilding a band of rows of an 8192-token map costs O(R·S), not the whole map."""
    recipe = trace.recipe
    if recipe is None:
        raise ValueError("this trace has no attention recipe: capture q_rot and k_rot with trace()")
    q = trace.get("q_rot", layer)[batch, head]  # (T, D)
    k = trace.get("k_rot", layer)[batch, head // recipe.n_groups]  # (S, D)
    start, stop, step = rows.indices(q.shape[0])
    if step != 1:
        raise ValueError(f"rows must be a contiguous slice, got step {step}")
    out = torch.empty(max(0, stop - start), k.shape[0], dtype=torch.float32)
    cap = make_softcap(recipe.softcap)
    for band in range(start, stop, REBUILD_BAND_ROWS):
        band_rows = slice(band, min(band + REBUILD_BAND_ROWS, stop))
        logits = cap(torch.matmul(q[band_rows], k.transpose(0, 1)) * recipe.scale)  # (band, S)
        scores = logits + recipe.mask_rows(band_rows, head, logits.dtype, layer)
        out[band - start:band_rows.stop - start] = recipe.softmax(scores, layer, head)
    return out
