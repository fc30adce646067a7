"""The block page's tables: the steps of one block with their shapes and sizes, and the
logit lens's top tokens after every layer. Pure: no streamlit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd


def block_steps(steps: Sequence) -> pd.DataFrame:
    """One row per txviz.analysis.block.Step."""
    return pd.DataFrame([{"step": s.name, "computes": s.equation, "shape": " × ".join(map(str, s.shape)),
                          "mean ‖·‖ per token": round(s.mean_norm, 2)} for s in steps])


def lens_top_tokens(probs, ids, decode: Callable[[list[int]], str]) -> pd.DataFrame:
    """A row per layer read (0: the embedding), a column per rank: the token as ``decode`` writes it
    (quoted, so spaces show) and its probability. ``probs`` and ``ids`` are (L+1, k)."""
    n_layers, top = ids.shape
    return pd.DataFrame({"after layer": list(range(n_layers))}
                        | {f"#{k + 1}": [f"{decode([int(ids[layer, k])])!r} {float(probs[layer, k]):.2f}"
                                         for layer in range(n_layers)] for k in range(top)})
