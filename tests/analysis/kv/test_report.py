"""The memory report (txviz.analysis.kv.report) is the one answer for one input: the calculator's
numbers where its fit sums the bill up, and the ``txviz memory`` command's JSON."""

from __future__ import annotations

import json

import pytest

from txviz import cli
from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.fit import fit, max_context
from txviz.analysis.kv.report import charted_lengths, memory_report

CASES = [
    ("llama-3-8b", 24.0, dict(batch=1, weight_dtype="bf16", kv_dtype="bf16", prefill_chunk=512)),
    ("mistral-7b-v0.1", 16.0, dict(batch=4, weight_dtype="bf16", kv_dtype="fp8", prefill_chunk=None)),
    ("gemma-3-270m", 1.0, dict(batch=2, weight_dtype="fp32", kv_dtype="fp32", prefill_chunk=None)),
    ("deepseek-v3", 800.0, dict(batch=1, weight_dtype="as published", kv_dtype="bf16", prefill_chunk=None)),
]


@pytest.mark.parametrize("preset, gpu, settings", CASES)
def test_without_tokens_the_report_is_summed_up_where_the_fit_is(preset, gpu, settings):
    model = memory_model.preset(preset)
    report = memory_report(model, gpu_gib=gpu, **settings)
    expected = fit(model, charted_lengths(model), gpu, **settings)
    assert report.fit == expected and report.tokens == expected.at and report.bill == expected.bill
    assert report.flops_per_token == memory.token_flops(model, expected.at)
    assert report.kv_bytes_per_token == memory.token_kv_bytes(model, settings["kv_dtype"])
    assert report.kv_bytes_per_token_past_windows == memory.token_kv_bytes_past_windows(model, settings["kv_dtype"])
    assert report.kv_fit == max_context(model, gpu, batch=settings["batch"], kv_dtype=settings["kv_dtype"],
                                        weight_dtype=settings["weight_dtype"])
    assert report.settings == settings


def test_the_kinds_are_the_same_model_with_other_kv_heads_and_mla_has_none():
    report = memory_report(memory_model.preset("llama-3-8b"), 4096, kv_dtype="fp8")
    variants = memory_model.kind_variants(memory_model.preset("llama-3-8b"))
    assert {kind: row["kv_heads"] for kind, row in report.kinds.items()} == {"MHA": 32, "GQA": 8, "MQA": 1}
    assert report.kinds["MHA"]["flops_per_token"] == memory.token_flops(variants["MHA"], 4096)
    assert report.kinds["MQA"]["kv_bytes_per_token"] == memory.token_kv_bytes(variants["MQA"], "fp8")
    assert memory_report(memory_model.preset("deepseek-v3"), 4096).kinds == {}


def test_a_model_without_a_context_needs_the_tokens():
    model = memory_model.MemoryModel(name="unsized", n_layers=2, n_heads=4, kv_heads=2, head_dim=8, n_params=10**6)
    with pytest.raises(ValueError, match="no context length"):
        memory_report(model)
    assert memory_report(model, 10).kv_cache_bytes == memory.kv_cache_bytes_at(model, 10)


@pytest.mark.parametrize("preset, gpu, settings", CASES)
def test_the_command_prints_the_report(capsys, preset, gpu, settings):
    argv = ["memory", "--json", "--preset", preset, "--gpu-gib", str(gpu), "--batch", str(settings["batch"]),
            "--weight-dtype", settings["weight_dtype"], "--kv-dtype", settings["kv_dtype"], "--seq", "3000"]
    if settings["prefill_chunk"]:
        argv += ["--prefill-chunk", str(settings["prefill_chunk"])]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    report = memory_report(memory_model.preset(preset), 3000, gpu_gib=gpu, **settings)
    assert out == json.loads(json.dumps({**report.to_dict({"preset": preset}), "notes": report.notes}))
    assert out["fits"]["at_tokens"] == report.fit.at and out["bill"]["tokens"] == 3000
