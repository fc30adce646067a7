"""Per-head attention summaries computed during the forward pass, one block of query rows at a time.

The metrics and their definitions are those of ``txviz.analysis.heads.metrics`` (same names, same order,
tested equal to ``head_metrics`` of the full eager maps), taken per query row from each block of
probabilities the attention layer hands to the recorder, so no T×T map is ever kept:

* ``entropy``: −Σ_j p_ij ln p_ij, computed as lse_i − Σ_j p_ij s_ij with lse_i = max_j s_ij − ln max_j p_ij
  (softmax's own identity: one multiply-add per weight instead of a logarithm);
* ``first_token_mass``: p_i0; ``prev_token``: p_{i,i−1}; ``max_weight``: max_j p_ij;
* ``duplicate_token``: Σ p_ij over keys j < i holding query i's token;
* ``induction``: Σ p_ij over keys 1 ≤ j < i whose previous token is query i's token.

The duplicate and induction patterns need the token ids, so the recorder is given them (``trace``
does). Rows are those of one sequence without a KV cache, as ``trace`` runs it: row i is position i
and key j is position j. Each row's values are kept, (B, H, T, M) per layer with M = len(METRICS),
NaN where a metric is undefined for that row (row 0 everywhere, since it can only attend to itself;
rows whose token has no earlier copy for duplicate/induction). ``head_metrics`` averages the defined
rows, which is exactly what ``analysis.heads.head_metrics`` does on a full map.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

# The metrics of txviz.analysis.heads.metrics, in the order of the last axis of every summary tensor.
METRICS = ("entropy", "first_token_mass", "prev_token", "duplicate_token", "induction", "max_weight")
ENTROPY, FIRST, PREV, DUPLICATE, INDUCTION, MAX_WEIGHT = range(len(METRICS))


class TokenPatterns:
    """Which keys repeat each query's token, for one batch of sequences (B, T), block by block.

    What a block needs depends only on the ids and the block's rows and keys, which are the same in
    every layer, so each block's patterns are built once and reused by all layers: the pairs of equal
    tokens as indices, at most the two bools per cell of the dense masks (67 MB at 8192 tokens;
    about 15 MB on English text, where 2–3% of the pairs repeat a token).
    """

    def __init__(self, ids: torch.Tensor):
        self.ids = ids  # (B, T)
        self.prev_ids = torch.cat([torch.full_like(ids[:, :1], -1), ids[:, :-1]], dim=1)  # key j's previous token
        positions = torch.arange(ids.shape[1], device=ids.device)
        first_seen = torch.stack([_first_occurrence(row) for row in ids])  # (B, T)
        self.has_duplicate = first_seen <= positions - 1  # some j < i holds the same token
        self.has_induction = first_seen <= positions - 2  # some j−1 < i−1 does, so 1 ≤ j < i exists
        self._blocks: dict[tuple, BlockPatterns] = {}  # (rows, keys, device) → patterns

    def block(self, rows: slice, keys: slice, device: torch.device | None = None) -> "BlockPatterns":
        """The patterns of one block, on ``device`` (where the layer computing it runs; None: the ids')."""
        device = self.ids.device if device is None else device
        key = (rows.start, rows.stop, keys.start, keys.stop, device)
        if key not in self._blocks:
            self._blocks[key] = BlockPatterns.build(self, rows, keys).to(device)
        return self._blocks[key]


# A block's duplicate/induction pairs are kept as int64 (flat index, target row) lists, 16 bytes a pair
# (index_add_ with int32 indices ran 4× slower), while that takes at most the 2 bytes per (row, key)
# cell of two dense bool masks: on English text about 1.5% of the cells.
SPARSE_BYTES_PER_PAIR, DENSE_BYTES_PER_CELL = 16, 2


@dataclass(frozen=True)
class BlockPatterns:
    """Everything about one block of rows × keys that does not depend on the layer."""

    pairs: tuple  # per sequence: (flat index r·K + k, target row r or R + r), int64, or two (R, K) bool masks
    prev_index: torch.Tensor  # (R,) where key i−1 sits in the block (clamped)
    prev_unreachable: torch.Tensor | None  # (R,) True where key i−1 is not in the block (row 0 aside: its
    # values are all undefined); None where it always is
    undefined: torch.Tensor  # (B, 1, R, M) NaN where a row has no value for a metric, else 0: added to the values
    first_key_is_token_0: bool

    @classmethod
    def build(cls, patterns: TokenPatterns, rows: slice, keys: slice) -> "BlockPatterns":
        ids, device = patterns.ids, patterns.ids.device
        q_pos = torch.arange(rows.start, rows.stop, device=device)
        k_pos = torch.arange(keys.start, keys.stop, device=device)
        earlier = k_pos[None, :] < q_pos[:, None]  # (R, K)
        duplicate = (ids[:, rows, None] == ids[:, None, keys]) & earlier  # (B, R, K): key j < i holds i's token
        induction = (ids[:, rows, None] == patterns.prev_ids[:, None, keys]) & earlier  # key j follows a copy
        prev_index = q_pos - 1 - keys.start
        undefined = torch.zeros(ids.shape[0], 1, len(q_pos), len(METRICS), dtype=torch.bool, device=device)
        undefined[..., q_pos == 0, :] = True  # row 0 can only attend to itself
        undefined[:, 0, :, METRICS.index("duplicate_token")] |= ~patterns.has_duplicate[:, rows]
        undefined[:, 0, :, METRICS.index("induction")] |= ~patterns.has_induction[:, rows]
        return cls(pairs=tuple(_pairs(d, i) for d, i in zip(duplicate, induction)),
                   prev_index=prev_index.clamp(0, len(k_pos) - 1),
                   prev_unreachable=_where_any(((prev_index < 0) | (prev_index >= len(k_pos))) & (q_pos != 0)),
                   undefined=torch.zeros(undefined.shape, device=device).masked_fill_(undefined, float("nan")),
                   first_key_is_token_0=keys.start == 0)

    def to(self, device: torch.device) -> "BlockPatterns":
        """The same patterns on ``device``, for a layer computing there (txviz.model.placement)."""
        pairs = tuple(tuple(t.to(device) for t in pair) for pair in self.pairs)
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self)
                 if f.name not in ("first_key_is_token_0", "pairs") and getattr(self, f.name) is not None}
        return replace(self, pairs=pairs, **moved)

    def masses(self, probs: torch.Tensor, duplicate: torch.Tensor, induction: torch.Tensor) -> None:
        """Duplicate-token and induction mass of each row, written into ``duplicate`` and ``induction``
        (B, H, R) each, from probs (B, H, R, K): the weights at the block's pairs gathered and summed into
        their rows, O(H·pairs), or for a dense block one masked sum per pattern."""
        b, h, n, k = probs.shape
        sums = probs.new_zeros(b, 2 * n, h)  # duplicate rows, then induction rows; heads last: index_add_
        for seq, pair in enumerate(self.pairs):  # adds whole (H,) rows, 1.5× faster than along dim 1
            if pair[0].dtype != torch.bool:
                flat, target = pair
                sums[seq].index_add_(0, target, probs[seq].reshape(h, n * k).index_select(1, flat).T)
            else:
                masks = pair  # (R, K) duplicate and induction masks
                sums[seq, :n] = torch.einsum("hrk,rk->rh", probs[seq], masks[0].to(probs.dtype))
                sums[seq, n:] = torch.einsum("hrk,rk->rh", probs[seq], masks[1].to(probs.dtype))
        sums = sums.transpose(1, 2)  # (B, H, 2R)
        duplicate.copy_(sums[..., :n])
        induction.copy_(sums[..., n:])


def _pairs(duplicate: torch.Tensor, induction: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """One sequence's (R, K) masks → (flat indices, target rows), duplicate pairs then induction pairs
    (target R + r), or the masks themselves where pairs would take more memory."""
    n, k = duplicate.shape
    if SPARSE_BYTES_PER_PAIR * (int(duplicate.sum()) + int(induction.sum())) > DENSE_BYTES_PER_CELL * n * k:
        return duplicate, induction
    flat_dup, flat_ind = duplicate.reshape(-1).nonzero()[:, 0], induction.reshape(-1).nonzero()[:, 0]
    flat = torch.cat([flat_dup, flat_ind])
    target = torch.cat([flat_dup // k, n + flat_ind // k])
    return flat, target


def _where_any(mask: torch.Tensor) -> torch.Tensor | None:
    """``mask``, or None where it holds no True (a step each block can skip)."""
    return mask if bool(mask.any()) else None


def _first_occurrence(ids: torch.Tensor) -> torch.Tensor:
    """(T,) → (T,): the first position holding each position's token."""
    _, inverse = torch.unique(ids, return_inverse=True)
    positions = torch.arange(len(ids), device=ids.device)
    first = torch.full((int(inverse.max()) + 1,), len(ids), dtype=torch.long, device=ids.device)
    first.scatter_reduce_(0, inverse, positions, reduce="amin")
    return first[inverse]


def row_metrics(probs: torch.Tensor, scores: torch.Tensor, block: BlockPatterns,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """One block: probs and finite scores (B, H, R, K) → (B, H, R, M), NaN where undefined, written into
    ``out`` when given (any strides: a layer's rows of its summaries); ``scores`` is overwritten (the
    layer drops it). Keys outside the block have zero weight."""
    probs = probs.float()  # no copy when already fp32
    b, h, n, _ = probs.shape
    out = probs.new_empty(b, h, n, len(METRICS)) if out is None else out
    p_max = torch.amax(probs, dim=-1, out=out[..., MAX_WEIGHT])  # (B, H, R)
    log_sum_exp = scores.amax(dim=-1).float().sub_(p_max.log())
    # in place, then summed: an einsum of the two ran as a batch of 1×K by K×1 products, 3× slower
    expected_score = (scores.mul_(probs) if scores.dtype == probs.dtype else scores.float().mul_(probs)).sum(dim=-1)
    torch.sub(log_sum_exp, expected_score, out=out[..., ENTROPY])
    if block.first_key_is_token_0:
        out[..., FIRST].copy_(probs[..., 0])
    else:
        out[..., FIRST].zero_()
    prev = out[..., PREV]
    torch.gather(probs, -1, block.prev_index.expand(b, h, n)[..., None], out=prev[..., None])
    if block.prev_unreachable is not None:
        prev.masked_fill_(block.prev_unreachable, 0.0)
    block.masses(probs, out[..., DUPLICATE], out[..., INDUCTION])
    return out.add_(block.undefined)  # x + 0 is x, x + NaN is NaN: 3× faster than a broadcast masked_fill_


class LayerSummaries:
    """The per-row metrics of one layer, filled block by block by the attention path."""

    def __init__(self, patterns: TokenPatterns):
        self.patterns = patterns
        self.rows: torch.Tensor | None = None  # (B, H, T, M) once the first block arrives

    def add(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        if self.rows is None:
            b, h, _, _ = probs.shape
            self.rows = torch.full((b, h, self.patterns.ids.shape[1], len(METRICS)), float("nan"))
        block = self.patterns.block(rows, keys, probs.device)
        if probs.device == self.rows.device and probs.dtype == self.rows.dtype:  # straight into this layer's rows
            row_metrics(probs, scores, block, out=self.rows[:, :, rows])
        else:
            self.rows[:, :, rows] = row_metrics(probs, scores, block).cpu()


def head_metrics(rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-row values (..., T, M) → each metric averaged over its defined rows, (...) per name:
    for a trace's ``head_summaries`` (L, B, H, T, M) that is (L, B, H)."""
    means = rows.nanmean(dim=-2)  # all-NaN columns stay NaN
    return {name: means[..., i] for i, name in enumerate(METRICS)}
