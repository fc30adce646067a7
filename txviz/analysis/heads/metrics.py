"""Per-head summaries of attention patterns (heads specialize).

Every metric is computed from attention probabilities ``probs`` (L, H, T, S) with S == T (one
sequence, no cache) and averaged over the query rows where it is defined:

* ``entropy``: −Σ_j p_ij ln p_ij in nats, rows 1…T−1 (row 0 can only attend to itself).
* ``first_token_mass``: p_i0, the attention sink (Xiao et al. 2023), rows 1…T−1.
* ``prev_token``: p_{i,i−1}, rows 1…T−1.
* ``duplicate_token``: mass on earlier copies of the query's own token, over rows that have one.
* ``induction``: mass on keys j whose previous token equals the query's token (ids[j−1] == ids[i]),
  over rows that have such a j: the "look at what came after last time" pattern (Olsson et al. 2022).

Both take ``ignore``: token ids that are not a word of their own, such as a word-level vocabulary's
unknown token. Two ``<|unk|>`` are usually two different words, so a query holding one has no
duplicate and no induction target, and a key after one is not "what came after last time".
* ``max_weight``: the largest weight of the row, rows 1…T−1.

Definitions follow TransformerLens's ``detect_head`` (attention mass on a pattern, rows averaged).
"""

from __future__ import annotations

import torch

from txviz.capture.summaries import METRICS  # the names and their order, defined once


def ignored_positions(ids: torch.Tensor, ignore: tuple[int, ...] = ()) -> torch.Tensor:
    """(T,) bool: the positions holding one of the ``ignore`` ids (e.g. the unknown token)."""
    return torch.isin(ids, torch.tensor(ignore, dtype=ids.dtype)) if ignore else torch.zeros_like(ids, dtype=torch.bool)


def duplicate_pattern(ids: torch.Tensor, ignore: tuple[int, ...] = ()) -> torch.Tensor:
    """(T, T) bool: key j < i holds the same token as query i (a query holding an ``ignore`` id: none)."""
    same = (ids[:, None] == ids[None, :]) & ~ignored_positions(ids, ignore)[:, None]
    return same & torch.ones_like(same).tril(-1)


def induction_pattern(ids: torch.Tensor, ignore: tuple[int, ...] = ()) -> torch.Tensor:
    """(T, T) bool: key j (1 ≤ j < i) follows an earlier copy of query i's token (a query holding an
    ``ignore`` id: none)."""
    t = ids.shape[0]
    pattern = torch.zeros(t, t, dtype=torch.bool)
    pattern[:, 1:] = ids[:, None] == ids[None, :-1]  # key j's predecessor equals query i's token
    pattern &= ~ignored_positions(ids, ignore)[:, None]
    return pattern & torch.ones(t, t, dtype=torch.bool).tril(-1)


def previous_token_pattern(t: int) -> torch.Tensor:
    return torch.ones(t, t, dtype=torch.bool).tril(-1) & ~torch.ones(t, t, dtype=torch.bool).tril(-2)


def pattern_score(probs: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """Mean over rows with a non-empty pattern of the attention mass on it: (..., T, S) → (...)."""
    rows = pattern.any(dim=-1)  # (T,)
    if not rows.any():
        return torch.full(probs.shape[:-2], float("nan"))
    mass = (probs.float() * pattern).sum(dim=-1)  # (..., T)
    return mass[..., rows].mean(dim=-1)


def head_metrics(probs: torch.Tensor, ids: torch.Tensor, ignore: tuple[int, ...] = ()) -> dict[str, torch.Tensor]:
    """probs (L, H, T, T), ids (T,) → each metric as an (L, H) tensor; ``ignore``: ids that repeat
    without being the same word (the unknown token), left out of the duplicate and induction patterns."""
    probs = probs.float()
    ids = ids.reshape(-1).cpu()
    rows = probs[..., 1:, :]  # row 0 is always all on itself
    if rows.shape[-2] == 0:
        nan = torch.full(probs.shape[:2], float("nan"))
        return {name: nan for name in METRICS}
    plogp = torch.where(rows > 0, rows * rows.clamp_min(1e-30).log(), torch.zeros_like(rows))
    return {
        "entropy": -plogp.sum(-1).mean(-1),
        "first_token_mass": rows[..., 0].mean(-1),
        "prev_token": pattern_score(probs, previous_token_pattern(len(ids))),
        "duplicate_token": pattern_score(probs, duplicate_pattern(ids, ignore)),
        "induction": pattern_score(probs, induction_pattern(ids, ignore)),
        "max_weight": rows.max(dim=-1).values.mean(-1),
    }


def head_table(probs: torch.Tensor, ids: torch.Tensor, layers: tuple[int, ...] | None = None,
               ignore: tuple[int, ...] = ()) -> list[dict]:
    """One row per (layer, head) with every metric: the table the CLI prints and the app sorts."""
    return metrics_table(head_metrics(probs, ids, ignore), layers)


def metrics_table(metrics: dict[str, torch.Tensor], layers: tuple[int, ...] | None = None) -> list[dict]:
    """The same table from (L, H) metrics however they were computed: from full maps (head_metrics) or
    from a long trace's per-row summaries (``Trace.head_metrics``)."""
    first = next(iter(metrics.values()))
    layers = layers if layers is not None else tuple(range(first.shape[0]))
    table = []
    for li, layer in enumerate(layers):
        for head in range(first.shape[1]):
            row = {"layer": layer, "head": head}
            for name, values in metrics.items():
                value = float(values[li, head])
                row[name] = None if value != value else round(value, 6)
            table.append(row)
    return table


def hide_sink(probs: torch.Tensor, sink: int = 0) -> torch.Tensor:
    """Drop the attention on key ``sink`` and renormalize each row over the other keys, to see what a
    head does besides parking attention on the first token. Rows with nothing left stay zero."""
    kept = probs.float().clone()
    kept[..., sink] = 0.0
    total = kept.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, kept / total.clamp_min(1e-30), kept)
