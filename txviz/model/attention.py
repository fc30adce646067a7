"""Causal self-attention, one code path for MHA, GQA and MQA.

    Attention(Q, K, V) = softmax(cap(QKᵀ·s) + M) V,   M_ij = 0 if key j is visible to query i else −∞

with s = 1/√d_k unless the config sets ``query_scale`` (Gemma 2/3: query_pre_attn_scalar^−½), ``cap``
Gemma 2's soft cap where the config asks for one (else the identity), optional QK-norm on each head's
q and k before RoPE (Gemma 3), plus ALiBi's bias inside M when the model uses it. Each layer gets the
AttentionContext of its kind (full, or sliding with its window and RoPE base; txviz.model.transformer).
GQA/MQA only change ``n_kv_heads``: each KV head is repeated for its group of query heads (llama's
``repeat_kv``). When nobody asks for the probabilities the fused kernel (``scaled_dot_product_attention``,
FlashAttention-style) computes the same output without materializing the T×S matrix. What a recorder
asks for (and a soft cap) picks one of three paths:

* ``_fused``: nothing about the weights is wanted and the scores are not soft-capped (the kernel has
  no such step): the fused kernel, O(T) memory.
* ``_eager``: whole T×S matrices are wanted (logits, scores, or probabilities by a recorder that
  takes them only whole): the reference implementation's order of operations, O(H·T·S) memory per layer.
* ``_blockwise``: only per-row facts are wanted (``head_summaries``), or the probabilities by a recorder
  that takes them a block of rows at a time (``map_blocks``: a trace writes each block straight into
  its stored maps), or nothing is but the scores are soft-capped: the eager arithmetic one block
  of query rows at a time, like FlashAttention's tiling in plain torch, each block handed to the
  recorder before it is dropped: O(H·rows·S) memory, and keys no query of the block can see
  (the future, or beyond a sliding window) are never multiplied. Its maps are the eager path's: the
  same products and softmax, masked keys exactly 0 (tests/capture/test_map_blocks.py; weights·V sums
  over a block's keys only, so later layers may differ in the last bit of fp32).
"""

from __future__ import annotations

import copy
from typing import Iterable, Literal

import torch
from torch import nn
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.model import block_workers
from txviz.model.kv_cache import NO_LAYER_CACHE, LayerKVCache, NoLayerCache
from txviz.model.norm import make_qk_norm
from txviz.model.positions import apply_rotary
from txviz.model.recording import NULL_LAYER_RECORDER, LayerRecorderProtocol
from txviz.model.softcap import make_softcap

# Scores per block of the blockwise path (B·H·rows·keys elements): 512K fp32 = 2 MB, one core's L2
# here, so the passes over a block (softmax, the recorder's maxima and sums) stay in cache where the
# keys allow; at least 32 rows, so the matrix products stay efficient at 8192 keys and the ~50 small
# operations per block stay a small share. Measured on one SmolLM2 layer with summaries (thread CPU
# time, min of repeats): 2^19 took 24 ms at 1024 tokens where 2^21 took 33, and about the same at 4096.
# Both are per torch thread: each operation on a block splits it among the threads, so with n threads a
# block n times as large keeps each core's share in its own L2, and the per-block operations (each a
# barrier every thread waits at) and their Python run n times less often.
BLOCK_ELEMENTS = 1 << 19
MIN_BLOCK_ROWS = 32
MAX_BLOCK_THREADS = 4
# captures that need the T×S matrices (a sink's share needs each whole row's normalizer: txviz.model.sinks)
WHOLE_MAPS = frozenset({"attn_logits", "attn_scores", "attn_probs", "attn_sink"})

Path = Literal["eager", "blockwise", "fused"]


def attention_path(capture: Iterable[str], softcapped: bool = False, map_blocks: bool = False) -> Path:
    """The path (see above) that computes attention when ``capture`` names are wanted, on a model whose
    scores are ``softcapped`` or not, for a recorder that takes the probabilities a block of rows at a
    time (``map_blocks``) or only whole: the one rule the layers follow and txviz.capture.cost estimates with."""
    names = capture if isinstance(capture, (set, frozenset)) else set(capture)
    whole = names & WHOLE_MAPS
    if whole and not (map_blocks and whole == {"attn_probs"}):
        return "eager"
    return "blockwise" if whole or "head_summaries" in names or softcapped else "fused"


class AttentionContext:
    """What every layer needs about positions for one forward call, computed once.

    q_pos (T,) are the positions of the new tokens, k_pos (S,) those of the keys attended to (cached
    and new, in the cache's order). ``mask`` is the additive (1|H, T, S) mask with the causal rule,
    the sliding window and ALiBi's bias folded in; None when plain ``is_causal`` says it all, or when
    every key is visible to every query (``all_visible``: one new token after a cache).
    """

    def __init__(self, positions: nn.Module, q_pos: torch.Tensor, k_pos: torch.Tensor,
                 sliding_window: int | None, dtype: torch.dtype):
        self.q_pos, self.k_pos, self.window = q_pos, k_pos, sliding_window
        self.start = int(q_pos[0]) if len(q_pos) else 0  # where new tokens go in a cache: read once, not per layer
        rotation = positions.rotation(q_pos)
        self.cos, self.sin = (None, None) if rotation is None else (r.to(dtype) for r in rotation)
        self.alibi = positions.bias(q_pos, k_pos)  # (H, T, S) or None
        # No cache: key j is token j, so the keys a block of queries can see form a known range.
        self.keys_are_queries = len(q_pos) == len(k_pos) and bool((q_pos == k_pos).all())
        self.is_causal = self.alibi is None and sliding_window is None and self.keys_are_queries
        # Decoding after a cache: every key is visible to every new token, so there is nothing to mask
        # (no mask to build per step, and the fused kernel takes its fast path).
        self.all_visible = self.alibi is None and not self.keys_are_queries and self._no_key_hidden()
        self.mask = None if self.is_causal or self.all_visible else self._build_mask(sliding_window, dtype)
        self._on_device = {q_pos.device: self}
        self._futures: dict[tuple[int, torch.dtype, torch.device], torch.Tensor] = {}  # see _future

    def on(self, device: torch.device) -> "AttentionContext":
        """This context with its tensors (positions, cos/sin, ALiBi bias, mask) on ``device``: a layer
        placed on another device than the embedding (txviz.model.placement) gets copies made once per
        call and device, shared by every layer there."""
        if device not in self._on_device:
            moved = copy.copy(self)
            for name in ("q_pos", "k_pos", "cos", "sin", "alibi", "mask"):
                value = getattr(self, name)
                setattr(moved, name, None if value is None else value.to(device))
            self._on_device[device] = moved  # the dict is shared with the copy
        return self._on_device[device]

    def _no_key_hidden(self) -> bool:
        newest_key, oldest_key = int(self.k_pos.max()), int(self.k_pos.min())
        first_query, last_query = int(self.q_pos[0]), int(self.q_pos[-1])  # new tokens are consecutive
        return newest_key <= first_query and (self.window is None or last_query - oldest_key < self.window)

    def _build_mask(self, window: int | None, dtype: torch.dtype) -> torch.Tensor:
        distance = self.q_pos[:, None] - self.k_pos[None, :]  # (T, S): how far back each key is
        visible = distance >= 0
        if window is not None:
            visible &= distance < window
        mask = torch.zeros(visible.shape, dtype=torch.float32, device=visible.device)
        mask = mask.masked_fill(~visible, float("-inf"))[None]  # (1, T, S)
        if self.alibi is not None:
            mask = mask + self.alibi  # (H, T, S)
        return mask.to(dtype)

    def causal_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """The additive mask, materialized also where ``is_causal`` made it implicit."""
        if self.mask is not None:
            return self.mask
        visible = self.k_pos[None, :] <= self.q_pos[:, None]
        return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill(~visible, float("-inf"))[None]

    def rotate(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """x rotated by this call's RoPE (x itself without RoPE), into ``out`` where it fits (apply_rotary)."""
        return x if self.cos is None else apply_rotary(x, self.cos, self.sin, out)

    def row_blocks(self, n_rows: int, batch_heads: int, threads: int | None = None) -> list[slice]:
        """Query rows cut into blocks of at most about ``block_budget(threads)`` scores each (and at least
        its rows): blocks of early rows, which see fewer keys, hold more rows."""
        blocks, start = [], 0
        budget, min_rows = block_budget(threads)
        while start < n_rows:
            size = min_rows
            while start + size < n_rows and batch_heads * 2 * size * self._key_width(start, 2 * size) <= budget:
                size *= 2
            blocks.append(slice(start, min(start + size, n_rows)))
            start += size
        return blocks

    def _key_width(self, start: int, size: int) -> int:
        keys = self.key_range(slice(start, min(start + size, len(self.q_pos))))
        return keys.stop - keys.start

    def key_range(self, rows: slice) -> slice:
        """The keys that queries ``rows`` may see: without a cache, query i sees keys ≤ i (and only the
        last W with a sliding window); with one, all keys in the cache's order."""
        if not self.keys_are_queries:
            return slice(0, len(self.k_pos))
        start = 0 if self.window is None else max(0, rows.start - self.window + 1)
        return slice(start, rows.stop)

    def mask_block_(self, scores: torch.Tensor, rows: slice, keys: slice) -> torch.Tensor:
        """Add the mask of one block to its scores (B, H, rows, keys) in place, with the dtype's most
        negative finite number standing in for −∞: softmax gives the same exact zeros (and, on a
        block that fits in cache, PyTorch's CPU softmax ran 7× faster than with −∞), and 0·min is 0
        where 0·(−∞) would be NaN in the sums the recorder takes over a row. A score plus that number
        is that number (any finite score is far below half its spacing, 2^103 in fp32)."""
        lowest = torch.finfo(scores.dtype).min
        if self.mask is not None:
            return scores.add_(self.mask[:, rows, keys].clamp(min=lowest))
        if self.all_visible:
            return scores
        # plain causal without a cache: only keys rows.start.. can lie in the future of a row. Added, not
        # masked_fill_'d: a broadcast boolean fill ran 10× slower than this add on the same block.
        square = scores[..., rows.start - keys.start:]  # (B, H, rows, rows)
        square.add_(self._future(square.shape[-1], scores.dtype, scores.device))
        return scores

    def _future(self, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """(n, n): the dtype's lowest number above the diagonal, 0 elsewhere, made once per size, dtype
        and device for every layer of the call."""
        if (n, dtype, device) not in self._futures:
            future = torch.ones(n, n, dtype=torch.bool, device=device).triu(1)
            self._futures[n, dtype, device] = torch.zeros(n, n, dtype=dtype, device=device).masked_fill_(
                future, torch.finfo(dtype).min)
        return self._futures[n, dtype, device]


def block_budget(threads: int | None = None) -> tuple[int, int]:
    """(scores, rows) of a block of the blockwise path computed with ``threads`` intra-op threads (None:
    torch's): BLOCK_ELEMENTS and MIN_BLOCK_ROWS per thread, for up to MAX_BLOCK_THREADS threads (at 8192
    keys a block then holds 4 × 32 rows of every head: 38 MB of fp32 scores for SmolLM2's 9 heads)."""
    threads = min(max(1, torch.get_num_threads() if threads is None else threads), MAX_BLOCK_THREADS)
    return BLOCK_ELEMENTS * threads, MIN_BLOCK_ROWS * threads


def repeat_kv(x: torch.Tensor, n_groups: int) -> torch.Tensor:
    """(B, Hkv, S, D) -> (B, Hkv·n_groups, S, D): KV head j serves query heads j·g … j·g+g−1."""
    if n_groups == 1:
        return x
    b, h_kv, s, d = x.shape
    return x[:, :, None].expand(b, h_kv, n_groups, s, d).reshape(b, h_kv * n_groups, s, d)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.n_groups = config.n_groups
        self.scale = config.head_dim ** -0.5 if config.query_scale is None else config.query_scale
        self.softcapped = config.attn_softcap is not None
        self.cap_scores = make_softcap(config.attn_softcap)  # identity without a cap
        d, h, h_kv = config.d_model, config.n_heads, config.n_kv_heads
        self.q_proj = nn.Linear(d, h * self.head_dim, bias=config.qkv_bias)
        self.k_proj = nn.Linear(d, h_kv * self.head_dim, bias=config.qkv_bias)
        self.v_proj = nn.Linear(d, h_kv * self.head_dim, bias=config.qkv_bias)
        self.o_proj = nn.Linear(h * self.head_dim, d, bias=config.out_bias)
        # QK-norm on q and k before RoPE: over each head's D, shared by the heads, or over all heads at once
        # (txviz.model.norm.make_qk_norm); the identity when off
        self.q_norm = make_qk_norm(config, h)
        self.k_norm = make_qk_norm(config, h_kv)

    def forward(self, x: torch.Tensor, ctx: AttentionContext, cache: LayerKVCache | NoLayerCache = NO_LAYER_CACHE,
                record: LayerRecorderProtocol = NULL_LAYER_RECORDER) -> torch.Tensor:
        # legend: B batch, T new tokens, S keys attended to, H query heads, Hkv KV heads, D head_dim
        b, t, _ = x.shape
        ctx = ctx.on(x.device)
        q = self.q_norm(self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2))  # (B, H, T, D)
        k = self.k_norm(self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2))  # (B, Hkv, T, D)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
        q, k, v = record.edit("q", q), record.edit("k", k), record.edit("v", v)  # interventions (txviz.causal)
        # a trace's q_rot/k_rot are computed straight into their kept slots (``place``), not copied there
        place = getattr(record, "place", None)
        q_rot = ctx.rotate(q, None if place is None else place("q_rot", q))
        k_rot = ctx.rotate(k, None if place is None else place("k_rot", k))
        k_all, v_all = cache.update(ctx.start, k_rot, v)  # (B, Hkv, S, D): cached and new, or just new
        record.many(q=q, k=k, v=v, q_rot=q_rot, k_rot=k_rot)
        if record.wants("kv_bytes"):  # a tensor made only when asked for: a plain call makes none
            record("kv_bytes", torch.tensor(cache.held_nbytes(k_all, v_all)))
        out = record.edit("head_out", self.attend(q_rot, k_all, v_all, ctx, record))  # (B, H, T, D)
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)  # (B, T, H·D)
        return self.o_proj(out)

    def attend(self, q, k, v, ctx: AttentionContext, record: LayerRecorderProtocol = NULL_LAYER_RECORDER) -> torch.Tensor:
        """softmax(scores)·V of projected, rotated q (B, H, T, D) and k, v (B, Hkv, S, D), by the path
        ``record`` asks for (_fused, _eager or _blockwise; see the module docstring)."""
        path = attention_path(record.wanted, self.softcapped, getattr(record, "map_blocks", False))
        return getattr(self, f"_{path}")(q, k, v, ctx, record)

    def _fused(self, q, k, v, ctx: AttentionContext, record: LayerRecorderProtocol) -> torch.Tensor:
        """The fused kernel: the weights are never materialized."""
        return F.scaled_dot_product_attention(q, k, v, attn_mask=ctx.mask, is_causal=ctx.is_causal,
                                              scale=self.scale, enable_gqa=self.n_groups > 1)

    def _eager(self, q, k, v, ctx: AttentionContext, record: LayerRecorderProtocol) -> torch.Tensor:
        """softmax(cap(QKᵀ·scale) + M)·V with every intermediate available to the recorder (the logits
        recorded are the capped ones: what the mask is added to)."""
        k, v = repeat_kv(k, self.n_groups), repeat_kv(v, self.n_groups)  # (B, H, S, D)
        logits = self.cap_scores(torch.matmul(q, k.transpose(2, 3)) * self.scale)  # (B, H, T, S)
        record("attn_logits", logits)
        scores = logits + ctx.causal_mask(logits.dtype)  # (B, H, T, S), −inf where masked
        record("attn_scores", scores)
        probs = self.weights(scores, record).to(q.dtype)
        record("attn_probs", probs)
        if record.wants("head_summaries"):  # the whole matrix is one block (finite, see mask_block_)
            record.attention_rows(slice(0, q.shape[2]), slice(0, k.shape[2]), probs,
                                  self.summary_scores(scores.clamp(min=torch.finfo(scores.dtype).min), probs))
        return torch.matmul(probs, v)  # (B, H, T, D)

    def weights(self, scores: torch.Tensor, record: LayerRecorderProtocol) -> torch.Tensor:
        """The attention weights (B, H, T, S) of masked scores, their softmax over the keys: in float32
        (float64 for float64 scores, as the circuit runner's checks use)."""
        return F.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32))

    def block_weights(self, scores: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``weights`` of one block of rows, written into ``out`` (the blockwise path's buffer)."""
        return torch.softmax(scores, dim=-1, dtype=torch.float32, out=out)

    def summary_scores(self, scores: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """The finite scores the recorder's row summaries take beside ``probs`` (txviz.capture.summaries)."""
        return scores

    def _blockwise(self, q, k, v, ctx: AttentionContext, record: LayerRecorderProtocol) -> torch.Tensor:
        """The eager arithmetic one block of query rows at a time; each block of probabilities goes
        to ``record.attention_rows`` and is dropped. GQA groups the g query heads of a KV head into
        one matrix product instead of copying K and V g times; the product applies the scale itself
        (baddbmm's alpha: the eager path's numbers, no pass over the scores). On the CPU with several
        threads the blocks are shared out among worker threads (txviz.model.block_workers.run_blocks),
        each block sized for its worker's threads, each worker writing its own rows."""
        b, h, t, d = q.shape
        k, v = k.contiguous(), v.contiguous()  # head-major once per layer: a strided K is copied by every matmul
        # (B, H, T, D) viewing a (B, T, H, D) tensor: what forward's transpose to (B, T, H·D) reads without a copy
        out = torch.empty(b, t, h, d, dtype=q.dtype, device=q.device).transpose(1, 2)
        split, blocks, most = block_plan(ctx, q, k, v)
        block_workers.run_blocks(split, blocks, lambda: _BlockRun(self, q, k, v, ctx, record, out, most).run)
        return out


def block_plan(ctx: AttentionContext, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> tuple[block_workers.Split | None, list[tuple[slice, slice]], int]:
    """One layer's blocks for the blockwise path: how they are shared out (block_workers.split_for, None:
    on the calling thread), each block's (rows, keys), sized for the threads that compute it, and the most
    scores one block holds (the size of its buffers)."""
    b, h, t, _ = q.shape
    split = block_workers.split_for(q, k, v)
    blocks = [(rows, ctx.key_range(rows))
              for rows in ctx.row_blocks(t, b * h, None if split is None else split.threads_each)]
    most = max(b * h * (rows.stop - rows.start) * (keys.stop - keys.start) for rows, keys in blocks)
    return split, blocks, most


class _BlockRun:
    """One thread's run through blocks of a layer's rows, with its two block buffers: every block's
    scores and weights are written into them (a fresh block of megabytes per step cost page faults as
    long as the arithmetic on it)."""

    def __init__(self, attn: Attention, q, k, v, ctx: AttentionContext, record: LayerRecorderProtocol,
                 out: torch.Tensor, most: int):
        self.attn, self.q, self.k, self.v, self.ctx, self.record, self.out = attn, q, k, v, ctx, record, out
        self.scores_buffer = torch.empty(most, dtype=q.dtype, device=q.device)
        self.probs_buffer = torch.empty(most, dtype=torch.float32, device=q.device)
        self.wants_maps = record.wants("attn_probs")  # a recorder taking map blocks (see attention_path)

    def run(self, blocks) -> None:
        attn, q, k, v, ctx, record = self.attn, self.q, self.k, self.v, self.ctx, self.record
        b, h, t, d = q.shape
        h_kv, g = attn.n_kv_heads, attn.n_groups
        for rows, keys in blocks:
            n, width = rows.stop - rows.start, keys.stop - keys.start
            q_block = q[:, :, rows].reshape(b * h_kv, g * n, d)  # (B·Hkv, g·rows, D): a group's heads stacked
            k_block = k[:, :, keys].reshape(b * h_kv, width, d)  # a view: k is contiguous
            scores = self.scores_buffer[:b * h * n * width].view(b * h_kv, g * n, width)
            if self.wants_maps:  # the eager path's two roundings (product, then scale): the maps it would keep
                torch.bmm(q_block, k_block.transpose(1, 2), out=scores).mul_(attn.scale)
            else:
                scores.baddbmm_(q_block, k_block.transpose(1, 2), beta=0, alpha=attn.scale)
            scores = ctx.mask_block_(attn.cap_scores(scores.view(b, h, n, width)), rows, keys)  # (B, H, rows, keys)
            probs = attn.block_weights(scores, self.probs_buffer[:scores.numel()].view(scores.shape))
            weights = probs.to(q.dtype)  # what the eager path records and multiplies V by
            if self.wants_maps:
                record.map_rows(rows, keys, weights, (t, k.shape[2]))
            record.attention_rows(rows, keys, probs, attn.summary_scores(scores, probs))
            grouped = torch.matmul(weights.view(b, h_kv, g * n, -1), v[:, :, keys])  # (B, Hkv, g·rows, D)
            self.out[:, :, rows] = grouped.view(b, h, n, d)
