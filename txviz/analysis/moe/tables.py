"""The rows and series the Mixture of Experts page shows, from a measured ``moe.Routing``, the lab
zoo's files and the capacity formulas: plain lists and dicts, so the page only lays them out."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from txviz.analysis.moe import routing as moe
from txviz.analysis.tradeoffs.zoo_results import zoo_curves, zoo_rows
from txviz.config import ModelConfig
from txviz.loading.zoo import SHIPPED_ZOO

RANKS = ("best", "second", "third", "fourth")


def ranked_probabilities(routing: moe.Routing, layer: int) -> dict[str, np.ndarray]:
    """{"best expert": (N,), "second expert": …}: each token's router probabilities in ``layer`` (an index
    into ``routing.layers``) sorted best first; the top k that run and the first left out, at most four."""
    probs = routing.probs[layer].sort(dim=-1, descending=True).values.numpy()  # (N, E) best first
    ranks = RANKS[:min(routing.n_experts, routing.top_k + 1)]
    return {f"{rank} expert": probs[:, r] for r, rank in enumerate(ranks)}


def balance_rows(measured: Mapping[str, moe.Routing], root: Path = SHIPPED_ZOO) -> list[dict]:
    """One row per zoo variant: the balancing weight it trained with, how evenly its router spread the
    ``measured`` tokens, and its validation loss (eval.json)."""
    curves = zoo_curves(list(measured), root)
    losses = {row["variant"]: row.get("val_loss") for row in zoo_rows(list(measured), root)}
    return [{"variant": name, "balancing weight": curves.get(name, {}).get("train_settings", {}).get("aux_weight"),
             "effective experts (mean)": float(m.effective_experts.mean()),
             "effective experts (worst layer)": float(m.effective_experts.min()),
             "busiest expert's share": float(m.load.max()), "aux loss (mean)": float(m.aux_loss.mean()),
             "load CV (mean)": float(m.cv.mean()), "router entropy (nats)": float(m.entropy.mean()),
             "val loss": losses[name]} for name, m in measured.items()]


def aux_loss_curves(names: Sequence[str], root: Path = SHIPPED_ZOO) -> dict[str, list[float]]:
    """The balancing loss logged during training, per variant that logged one."""
    return {name: c["aux_loss"] for name, c in zoo_curves(names, root).items() if c.get("aux_loss")}


def cost_rows(configs: Sequence[ModelConfig]) -> list[dict]:
    """Capacity against compute of each config, FLOPs at half its context (the mean number of keys over
    a full window)."""
    rows = []
    for c in configs:
        cap = moe.capacity(c, context=c.max_seq_len // 2)
        rows.append({"model": c.name, "experts": f"{c.top_k} of {c.n_experts}" if c.is_moe else "dense",
                     "total params": cap.total_params, "active params": cap.active_params,
                     "active share": f"{cap.active_share:.0%}", "FLOPs/token": cap.flops_per_token,
                     "total params per FLOP": round(cap.params_per_flop, 3)})
    return rows
