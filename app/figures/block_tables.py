"""The block page's tables: the steps of one block with their shapes and sizes, and the
logit lens's top tokens after every layer. Pure: no streamlit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd


def block_steps(steps: Sequence) -> pd.DataFrame:
    """One row per txviz.analysis.block.Step."""
    return pd.DataFrame([{"step": s.name, "computes": s.equation, "shape": " × ".join(map(str, s.shape)),
                          "mean ‖·‖ per token": round(s.mean_norm, 2)} for s in steps])


def lens_top_tokens(probs, ids, decode: Callable[[list[int]], str], known: int | None = None) -> pd.DataFrame:
    """A row per layer read (0: the embedding), a column per rank: the token as ``decode`` writes it
    (quoted, so spaces show) and its probability. ``probs`` and ``ids`` are (L+1, k). Ids from ``known``
    on have no token (a model's vocabulary padded past its tokenizer's, as Qwen's is): shown by number."""
    n_layers, top = ids.shape

    def text(token_id: int) -> str:
        return repr(decode([token_id])) if known is None or token_id < known else f"<id {token_id}: no token>"

    return pd.DataFrame({"after layer": list(range(n_layers))}
                        | {f"#{k + 1}": [f"{text(int(ids[layer, k]))} {float(probs[layer, k]):.2f}"
                                         for layer in range(n_layers)] for k in range(top)})
