"""The tables and series the Mixture of Experts page shows (txviz.analysis.moe.tables), on a tiny
random MoE and a zoo folder written here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.analysis.moe import routing as moe
from txviz.analysis.moe import tables
from txviz.analysis.tradeoffs.formulas import REFERENCES
from txviz.loading.zoo import config_json


def tiny_routing(top_k: int = 2, n_experts: int = 4, seed: int = 0) -> moe.Routing:
    model = random_decoder(tiny_config(n_experts=n_experts, top_k=top_k), seed=seed)
    return moe.measure_routing(model, random_ids(model.config, 24, seed=seed))


def write_variant(root, name: str, aux_weight: float | None, val_loss: float) -> None:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(config_json(tiny_config(n_experts=4, top_k=2).replace(name=name)))
    (directory / "eval.json").write_text(json.dumps({"val_loss": val_loss}))
    curves = {"loss": [3.0, 2.0], "train_settings": {"aux_weight": aux_weight}}
    if aux_weight:
        curves["aux_loss"] = [1.3, 1.1]
    (directory / "curves.json").write_text(json.dumps(curves))


@pytest.mark.parametrize("top_k,n_experts,ranks", [(1, 4, 2), (2, 4, 3), (3, 3, 3), (3, 8, 4)])
def test_ranked_probabilities_show_the_chosen_and_the_first_left_out(top_k, n_experts, ranks):
    routing = tiny_routing(top_k, n_experts)
    series = tables.ranked_probabilities(routing, 1)
    assert list(series) == [f"{r} expert" for r in tables.RANKS[:ranks]]
    columns = torch.from_numpy(np.stack(list(series.values())))  # (ranks, N)
    assert columns.shape == (ranks, routing.n_tokens)
    assert (columns[:-1] >= columns[1:]).all()  # best first, token by token
    assert torch.allclose(columns[0], routing.probs[1].max(dim=-1).values)


def test_balance_rows_read_the_weight_and_loss_and_measure_the_spread(tmp_path):
    write_variant(tmp_path, "moe_top2", None, 2.5)
    write_variant(tmp_path, "moe_top2_balanced", 0.01, 2.4)
    measured = {"moe_top2": tiny_routing(seed=0), "moe_top2_balanced": tiny_routing(seed=1)}
    rows = tables.balance_rows(measured, tmp_path)
    assert [r["variant"] for r in rows] == list(measured)
    assert [r["balancing weight"] for r in rows] == [None, 0.01] and [r["val loss"] for r in rows] == [2.5, 2.4]
    for row, routing in zip(rows, measured.values()):
        assert row["effective experts (mean)"] == pytest.approx(float(routing.effective_experts.mean()))
        assert row["effective experts (worst layer)"] <= row["effective experts (mean)"] <= 4
        assert 0.25 <= row["busiest expert's share"] <= 1
    assert tables.aux_loss_curves(list(measured), tmp_path) == {"moe_top2_balanced": [1.3, 1.1]}


def test_cost_rows_say_what_a_token_runs_against_what_memory_holds():
    dense, sparse = REFERENCES["mistral-7b"], REFERENCES["mixtral-8x7b"]
    rows = tables.cost_rows([dense, sparse])
    assert [r["experts"] for r in rows] == ["dense", "2 of 8"]
    assert rows[0]["active share"] == "100%" and rows[0]["total params"] == rows[0]["active params"]
    assert rows[1]["active params"] < rows[1]["total params"]
    assert rows[1]["total params per FLOP"] > rows[0]["total params per FLOP"]  # capacity bought per unit of compute
