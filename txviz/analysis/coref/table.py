"""Head rankings as the app shows them: one row per head with the candidate it favours, and a
layer × head grid of any per-head number (a sentence's margin, the built-in set's accuracy)."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from txviz.analysis.coref.ranking import HeadScore


def ranking_rows(scores: Sequence[HeadScore], names: Sequence[str]) -> list[dict]:
    """Scores (best first) → rows: layer, head, margin, the candidate it predicts ("tie" when two get
    the same mass) and its mass on each candidate ("→ <name>")."""
    return [{"layer": s.layer, "head": s.head, "margin": s.margin,
             "predicts": "tie" if s.predicted is None else names[s.predicted]}
            | {f"→ {name}": m for name, m in zip(names, s.mass)} for s in scores]


def count_predicting(rows: Iterable[dict], name: str) -> int:
    """How many heads put the most attention on candidate ``name``."""
    return sum(row["predicts"] == name for row in rows)


def head_grid(values: Iterable[tuple[int, int, float]], n_layers: int, n_heads: int) -> np.ndarray:
    """(layer, head, value) triples → an (n_layers, n_heads) array; heads not given are 0."""
    grid = np.zeros((n_layers, n_heads))
    for layer, head, value in values:
        grid[layer, head] = value
    return grid
