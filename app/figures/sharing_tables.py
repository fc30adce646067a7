"""The layer-sharing sweep in words and a table (txviz.analysis.kv.sharing.LayerSharing): which layers
cost least and most to merge, and the path that merges the cheapest first. Pure: no streamlit."""

from __future__ import annotations


def cheapest_and_dearest(sweep, n: int = 3) -> tuple[list[int], list[int]]:
    """The ``n`` cheapest layers (cheapest first) and the ``n`` dearest (dearest first)."""
    return list(sweep.order[:n]), list(sweep.order[-n:][::-1])


def sharing_path(sweep) -> dict[str, list]:
    """The path's columns, rounded as the page shows them."""
    return {"layers merged": sweep.path_layers, "KV bytes / token": sweep.path_kv_bytes_per_token,
            "perplexity": [round(p, 2) for p in sweep.path_perplexity],
            "mean KL (nats)": [round(k, 4) for k in sweep.path_kl],
            "top-1 agreement": [f"{a * 100:.1f}%" for a in sweep.path_top1]}
