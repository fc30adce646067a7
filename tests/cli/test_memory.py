"""``txviz memory``: the same answer as the KV page's calculator (txviz.analysis.kv.fit) for the same input
(the command line once said 74,075 tokens fit where the app, counting activations too, said 44,722)."""

from __future__ import annotations

import json

import pytest

from txviz import cli
from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.fit import fit


def _memory(capsys, *argv: str) -> dict:
    assert cli.main(["memory", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("preset, gpu, settings", [
    ("llama-3-8b", 24.0, dict(batch=1, weight_dtype="bf16", kv_dtype="bf16", prefill_chunk=None)),
    ("llama-3-8b", 24.0, dict(batch=1, weight_dtype="bf16", kv_dtype="bf16", prefill_chunk=512)),
    ("mistral-7b-v0.1", 16.0, dict(batch=4, weight_dtype="bf16", kv_dtype="fp8", prefill_chunk=None)),
    ("gemma-3-270m", 1.0, dict(batch=2, weight_dtype="fp32", kv_dtype="fp32", prefill_chunk=None)),
])
def test_fits_is_the_calculator_s_figure_for_the_same_input(capsys, preset, gpu, settings):
    argv = ["--preset", preset, "--gpu-gib", str(gpu), "--batch", str(settings["batch"]),
            "--weight-dtype", settings["weight_dtype"], "--kv-dtype", settings["kv_dtype"]]
    if settings["prefill_chunk"]:
        argv += ["--prefill-chunk", str(settings["prefill_chunk"])]
    out = _memory(capsys, *argv)
    model = memory_model.preset(preset)  # what calculator.bill_numbers computes for these widgets
    expected = fit(model, memory.context_lengths(int(model.max_context or 131072)), gpu, **settings)
    fits = out["fits"]
    assert fits["longest_tokens"] == expected.longest and fits["at_tokens"] == expected.at
    assert (fits["weights"], fits["kv_cache"], fits["activations"]) == \
        (expected.bill.weights, expected.bill.kv_cache, expected.bill.activations)
    assert fits["counts"] == "weights + KV cache + activations" and fits["note"] in out["notes"]
    assert out["max_context"]["counts"] == "weights + KV cache (no activations)"


def test_the_bill_at_seq_counts_activations_and_a_seq_past_the_context_is_noted(capsys):
    out = _memory(capsys, "--preset", "llama-3-8b", "--seq", "100000")
    bill = memory.memory_bill(memory_model.preset("llama-3-8b"), 100_000)
    assert out["bill"]["activations"] == bill.activations > 0 and out["bill"]["total"] == bill.total
    assert out["notes"] == ["--seq 100,000 is longer than the 8,192 tokens the model was built for"]
    assert _memory(capsys, "--preset", "llama-3-8b", "--seq", "8192")["notes"] == []
