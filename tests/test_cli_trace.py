"""``txviz trace``: every head's metrics from per-row summaries, equal to the metrics of the full maps;
``--plan`` says what it would keep and cost without running."""

from __future__ import annotations

import json

import pytest
import torch

from txviz.analysis.heads import head_table
from txviz.cli import main
from txviz.loading import load
from txviz.loading.zoo import SHIPPED_ZOO
from txviz.capture.trace import trace

MODEL = str(SHIPPED_ZOO / "base")
PROMPT = "Once upon a time there was a little dog. The dog ran to the park, and the dog ran home."


def run(capsys, *argv) -> dict:
    assert main(["trace", "--prompt", PROMPT, "--model", MODEL, "--device", "cpu", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_head_table_equals_the_full_maps_metrics(capsys):
    out = run(capsys, "--bos", "sink")
    loaded = load(MODEL, device="cpu")
    ids = loaded.tokenizer.encode(PROMPT, bos="sink").ids
    assert [t["id"] for t in out["tokens"]] == list(ids)
    full = trace(loaded.model, torch.tensor(ids), capture=("attn_probs",))
    expected = head_table(full["attn_probs"][:, 0], full.ids[0], full.layers)
    assert len(out["heads"]) == len(expected) == loaded.config.n_layers * loaded.config.n_heads
    for got, want in zip(out["heads"], expected):
        assert (got["layer"], got["head"]) == (want["layer"], want["head"])
        for metric, value in want.items():
            assert (got[metric] is None) == (value is None), metric
            if value is not None:
                assert got[metric] == pytest.approx(value, abs=2e-6), (got["layer"], got["head"], metric)
    assert any(row["duplicate_token"] is not None for row in out["heads"])  # "dog" repeats


def test_plan_reports_the_cost_without_running(capsys):
    out = run(capsys, "--plan")
    assert "heads" not in out and "seconds" not in out
    config = load(MODEL, device="cpu").config
    n = out["n_tokens"]
    cost = out["cost"]
    assert cost["every_map_bytes"] == config.n_layers * config.n_heads * n * n * 4
    assert cost["stored_bytes"] == config.n_layers * config.n_heads * n * 6 * 4  # six metrics per row, fp32
    assert cost["stored_bytes"] < cost["estimated_bytes"] and cost["estimated_seconds"] >= 0
    assert run(capsys)["cost"] == cost  # the run reports the same figures
