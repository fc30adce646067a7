"""What the lab's zoo of tiny trained variants measured (assets/zoo/<variant>/config.json + eval.json +
curves.json, written by txviz.lab), beside the formulas' costs of each variant's config: the rows and
curves the Design tradeoffs and MoE pages show. The variants of each comparison:

(a) depth vs width: deep_narrow / base / shallow_wide at equal non-embedding parameters;
(b) dense vs MoE: the dense base against its MoE variants, with and without the balancing loss;
(c) MHA vs GQA vs MQA: their validation losses beside their KV bytes per token;
(g) positions beyond the training context: the validation loss at 1×, 2× and 4× it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

from txviz.analysis.kv.memory import token_kv_bytes
from txviz.loading.zoo import CURVES_FILE, EVAL_FILE, SHIPPED_ZOO, read_txviz_config
from txviz.model.counts import count_active_params, count_params, flops_per_token, non_embedding_params

DEPTH_WIDTH = ("deep_narrow", "base", "shallow_wide")
DENSE_MOE = ("base", "moe_top1", "moe_top1_balanced", "moe_top2", "moe_top2_balanced")
ATTENTION_KINDS = ("mha", "base", "mqa")
POSITIONS = ("base", "alibi", "learned", "no_positions")


def _zoo_row(directory: Path, kv_dtype: str) -> dict:
    config = read_txviz_config(directory)
    evaluation = json.loads((directory / EVAL_FILE).read_text(encoding="utf-8"))
    extrapolation = evaluation.get("extrapolation", {})
    load = evaluation.get("expert_load") or {}
    effective = load.get("effective_experts_per_layer")
    mean_context = (config.max_seq_len + 1) / 2  # the average number of keys over a training window
    return {"variant": directory.name, "trained": True, "about": config.source, "config": config,
            "n_layers": config.n_layers, "d_model": config.d_model, "n_kv_heads": config.n_kv_heads,
            "positions": config.positions, "n_experts": config.n_experts,
            "top_k": config.top_k if config.is_moe else None,
            "params": count_params(config), "non_embedding_params": non_embedding_params(config),
            "active_params": count_active_params(config),
            "flops_per_token": flops_per_token(config, math.ceil(mean_context)),
            "kv_bytes_per_token": token_kv_bytes(config, kv_dtype),
            "context": extrapolation.get("context", config.max_seq_len),
            "val_loss": evaluation.get("val_loss"), "val_loss_2x": evaluation.get("val_loss_2x"),
            "val_loss_4x": evaluation.get("val_loss_4x"),
            "loss_beyond": extrapolation.get("loss_beyond_context_at", {}),
            "why_null": extrapolation.get("why_null"),
            "expert_load": load.get("per_layer"),
            "effective_experts": None if effective is None else sum(effective) / len(effective)}


def zoo_rows(names: Sequence[str], root: Path = SHIPPED_ZOO, *, kv_dtype: str = "fp32") -> list[dict]:
    """One row per variant: its shape and costs, and the losses its eval.json holds; a variant not
    trained (yet) is a row with ``trained`` False. KV bytes in ``kv_dtype`` (the zoo runs in fp32)."""
    rows = []
    for name in names:
        directory = Path(root) / name
        trained = (directory / EVAL_FILE).is_file() and (directory / "config.json").is_file()
        rows.append(_zoo_row(directory, kv_dtype) if trained else {"variant": name, "trained": False})
    return rows


def zoo_curves(names: Sequence[str], root: Path = SHIPPED_ZOO) -> dict[str, dict]:
    """Training curves (loss, and the load-balancing loss of MoE runs) of the trained variants, with the
    settings they were trained under (``train_settings``: steps, aux_weight, …) where the file has them."""
    curves = {}
    for name in names:
        path = Path(root) / name / CURVES_FILE
        if path.is_file():
            data = json.loads(path.read_text(encoding="utf-8"))
            curves[name] = {k: data[k] for k in ("loss", "aux_loss", "tokens_per_second", "seconds", "train_settings")
                            if k in data}
    return curves


def extrapolation_rows(names: Sequence[str] = POSITIONS, root: Path = SHIPPED_ZOO) -> list[dict]:
    """(g): validation loss at 1×, 2×, 4× the training context, and over the unseen positions only."""
    rows = []
    for row in zoo_rows(names, root):
        if not row["trained"]:
            rows.append({"variant": row["variant"], "trained": False})
            continue
        context, beyond = row["context"], row["loss_beyond"]
        rows.append({"variant": row["variant"], "trained": True, "positions": row["positions"], "context": context,
                     "loss_1x": row["val_loss"], "loss_2x": row["val_loss_2x"], "loss_4x": row["val_loss_4x"],
                     "loss_beyond_2x": beyond.get(str(2 * context)), "loss_beyond_4x": beyond.get(str(4 * context)),
                     "why_null": row["why_null"]})
    return rows
