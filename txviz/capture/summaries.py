"""Per-head attention summaries computed during the forward pass, one block of query rows at a time.

The metrics and their definitions are those of ``txviz.analysis.heads`` (same names, same order,
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

# The metrics of txviz.analysis.heads, in the order of the last axis of every summary tensor.
METRICS = ("entropy", "first_token_mass", "prev_token", "duplicate_token", "induction", "max_weight")


class TokenPatterns:
    """Which keys repeat each query's token, for one batch of sequences (B, T), block by block.

    What a block needs depends only on the ids and the block's rows and keys, which are the same in
    every layer, so each block's patterns are built once and reused by all layers (two bools per
    causal (query, key) pair: 67 MB at 8192 tokens).
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


@dataclass(frozen=True)
class BlockPatterns:
    """Everything about one block of rows × keys that does not depend on the layer."""

    duplicate: torch.Tensor  # (B, R, K) True where key j < i holds query i's token
    induction: torch.Tensor  # (B, R, K) True where key j (1 ≤ j < i) follows a copy of query i's token
    prev_index: torch.Tensor  # (R,) where key i−1 sits in the block (clamped)
    prev_reachable: torch.Tensor  # (R,) whether it is in the block at all
    undefined: torch.Tensor  # (B, 1, R, M) metrics a row has no value for
    first_key_is_token_0: bool

    @classmethod
    def build(cls, patterns: TokenPatterns, rows: slice, keys: slice) -> "BlockPatterns":
        ids, device = patterns.ids, patterns.ids.device
        q_pos = torch.arange(rows.start, rows.stop, device=device)
        k_pos = torch.arange(keys.start, keys.stop, device=device)
        earlier = k_pos[None, :] < q_pos[:, None]  # (R, K)
        duplicate = (ids[:, rows, None] == ids[:, None, keys]) & earlier
        induction = (ids[:, rows, None] == patterns.prev_ids[:, None, keys]) & earlier
        prev_index = q_pos - 1 - keys.start
        undefined = torch.zeros(ids.shape[0], 1, len(q_pos), len(METRICS), dtype=torch.bool, device=device)
        undefined[..., q_pos == 0, :] = True  # row 0 can only attend to itself
        undefined[:, 0, :, METRICS.index("duplicate_token")] |= ~patterns.has_duplicate[:, rows]
        undefined[:, 0, :, METRICS.index("induction")] |= ~patterns.has_induction[:, rows]
        return cls(duplicate=duplicate, induction=induction,
                   prev_index=prev_index.clamp(0, len(k_pos) - 1),
                   prev_reachable=(prev_index >= 0) & (prev_index < len(k_pos)),
                   undefined=undefined, first_key_is_token_0=keys.start == 0)

    def to(self, device: torch.device) -> "BlockPatterns":
        """The same patterns on ``device``, for a layer computing there (txviz.model.placement)."""
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self) if f.name != "first_key_is_token_0"}
        return replace(self, **moved)


def _first_occurrence(ids: torch.Tensor) -> torch.Tensor:
    """(T,) → (T,): the first position holding each position's token."""
    _, inverse = torch.unique(ids, return_inverse=True)
    positions = torch.arange(len(ids), device=ids.device)
    first = torch.full((int(inverse.max()) + 1,), len(ids), dtype=torch.long, device=ids.device)
    first.scatter_reduce_(0, inverse, positions, reduce="amin")
    return first[inverse]


def row_metrics(probs: torch.Tensor, scores: torch.Tensor, block: BlockPatterns) -> torch.Tensor:
    """One block: probs and finite scores (B, H, R, K) → (B, H, R, M), NaN where undefined.
    Keys outside the block have zero weight."""
    probs, scores = probs.float(), scores.float()
    b, h, n, _ = probs.shape
    p_max = probs.amax(dim=-1)  # (B, H, R)
    log_sum_exp = scores.amax(dim=-1) - p_max.log()
    entropy = log_sum_exp - torch.einsum("bhrk,bhrk->bhr", probs, scores)
    first = probs[..., 0] if block.first_key_is_token_0 else probs.new_zeros(b, h, n)
    prev = probs.gather(-1, block.prev_index.expand(b, h, n)[..., None])[..., 0]
    prev = torch.where(block.prev_reachable, prev, 0.0)
    duplicate = torch.einsum("bhrk,brk->bhr", probs, block.duplicate.to(probs.dtype))
    induction = torch.einsum("bhrk,brk->bhr", probs, block.induction.to(probs.dtype))
    values = torch.stack([entropy, first, prev, duplicate, induction, p_max], dim=-1)  # (B, H, R, M)
    return values.masked_fill_(block.undefined, float("nan"))


class LayerSummaries:
    """The per-row metrics of one layer, filled block by block by the attention path."""

    def __init__(self, patterns: TokenPatterns):
        self.patterns = patterns
        self.rows: torch.Tensor | None = None  # (B, H, T, M) once the first block arrives

    def add(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        if self.rows is None:
            b, h, _, _ = probs.shape
            self.rows = torch.full((b, h, self.patterns.ids.shape[1], len(METRICS)), float("nan"))
        self.rows[:, :, rows] = row_metrics(probs, scores, self.patterns.block(rows, keys, probs.device)).cpu()


def head_metrics(rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-row values (..., T, M) → each metric averaged over its defined rows, (...) per name:
    for a trace's ``head_summaries`` (L, B, H, T, M) that is (L, B, H)."""
    means = rows.nanmean(dim=-2)  # all-NaN columns stay NaN
    return {name: means[..., i] for i, name in enumerate(METRICS)}
