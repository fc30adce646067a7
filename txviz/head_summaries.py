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

import torch

METRICS = ("entropy", "first_token_mass", "prev_token", "duplicate_token", "induction", "max_weight")


class TokenPatterns:
    """Which keys repeat each query's token, for one batch of sequences (B, T), block by block."""

    def __init__(self, ids: torch.Tensor):
        self.ids = ids  # (B, T)
        self.prev_ids = torch.cat([torch.full_like(ids[:, :1], -1), ids[:, :-1]], dim=1)  # key j's previous token
        positions = torch.arange(ids.shape[1], device=ids.device)
        first_seen = torch.stack([_first_occurrence(row) for row in ids])  # (B, T)
        self.has_duplicate = first_seen <= positions - 1  # some j < i holds the same token
        self.has_induction = first_seen <= positions - 2  # some j−1 < i−1 does, so 1 ≤ j < i exists

    def duplicate(self, rows: slice, keys: slice) -> torch.Tensor:
        """(B, rows, keys) bool: key j < i holds query i's token."""
        same = self.ids[:, rows, None] == self.ids[:, None, keys]
        return same & _earlier(rows, keys, self.ids.device)

    def induction(self, rows: slice, keys: slice) -> torch.Tensor:
        """(B, rows, keys) bool: key j (1 ≤ j < i) comes right after a copy of query i's token."""
        follows = self.ids[:, rows, None] == self.prev_ids[:, None, keys]
        return follows & _earlier(rows, keys, self.ids.device)


def _first_occurrence(ids: torch.Tensor) -> torch.Tensor:
    """(T,) → (T,): the first position holding each position's token."""
    _, inverse = torch.unique(ids, return_inverse=True)
    positions = torch.arange(len(ids), device=ids.device)
    first = torch.full((int(inverse.max()) + 1,), len(ids), dtype=torch.long, device=ids.device)
    first.scatter_reduce_(0, inverse, positions, reduce="amin")
    return first[inverse]


def _earlier(rows: slice, keys: slice, device) -> torch.Tensor:
    """(rows, keys) bool: key position < query position."""
    return torch.arange(keys.start, keys.stop, device=device)[None, :] < torch.arange(rows.start, rows.stop, device=device)[:, None]


def row_metrics(probs: torch.Tensor, scores: torch.Tensor, rows: slice, keys: slice,
                patterns: TokenPatterns) -> torch.Tensor:
    """One block: probs and finite scores (B, H, R, K) of query rows ``rows`` over keys ``keys`` →
    (B, H, R, M), NaN where undefined. Keys outside ``keys`` have zero weight."""
    probs, scores = probs.float(), scores.float()
    b, h, n, k = probs.shape
    positions = torch.arange(rows.start, rows.stop, device=probs.device)
    p_max = probs.amax(dim=-1)  # (B, H, R)
    log_sum_exp = scores.amax(dim=-1) - p_max.log()
    entropy = log_sum_exp - torch.einsum("bhrk,bhrk->bhr", probs, scores)
    first = probs[..., 0] if keys.start == 0 else probs.new_zeros(b, h, n)
    prev_index = positions - 1 - keys.start  # where key i−1 sits in the block
    reachable = (prev_index >= 0) & (prev_index < k)
    prev = probs.gather(-1, prev_index.clamp(0, k - 1).expand(b, h, n)[..., None])[..., 0]
    prev = torch.where(reachable, prev, 0.0)
    duplicate = torch.einsum("bhrk,brk->bhr", probs, patterns.duplicate(rows, keys).to(probs.dtype))
    induction = torch.einsum("bhrk,brk->bhr", probs, patterns.induction(rows, keys).to(probs.dtype))
    values = torch.stack([entropy, first, prev, duplicate, induction, p_max], dim=-1)  # (B, H, R, M)
    undefined = torch.zeros(b, 1, n, len(METRICS), dtype=torch.bool, device=probs.device)
    undefined[..., positions == 0, :] = True
    undefined[:, 0, :, METRICS.index("duplicate_token")] |= ~patterns.has_duplicate[:, rows]
    undefined[:, 0, :, METRICS.index("induction")] |= ~patterns.has_induction[:, rows]
    return values.masked_fill(undefined, float("nan"))


class LayerSummaries:
    """The per-row metrics of one layer, filled block by block by the attention path."""

    def __init__(self, patterns: TokenPatterns):
        self.patterns = patterns
        self.rows: torch.Tensor | None = None  # (B, H, T, M) once the first block arrives

    def add(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        if self.rows is None:
            b, h, _, _ = probs.shape
            self.rows = torch.full((b, h, self.patterns.ids.shape[1], len(METRICS)), float("nan"))
        self.rows[:, :, rows] = row_metrics(probs, scores, rows, keys, self.patterns).cpu()


def head_metrics(rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-row values (..., T, M) → each metric averaged over its defined rows, (...) per name:
    for a trace's ``head_summaries`` (L, B, H, T, M) that is (L, B, H)."""
    means = rows.nanmean(dim=-2)  # all-NaN columns stay NaN
    return {name: means[..., i] for i, name in enumerate(METRICS)}
