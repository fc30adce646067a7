"""``txviz trace``: every head's metrics from per-row summaries, equal to the metrics of the full maps;
``--plan`` says what it would keep and cost without running."""

from __future__ import annotations

import json

import pytest
import torch

from txviz.analysis.heads.metrics import head_table
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


@pytest.mark.parametrize("env, value, argv, named", [
    ("TXVIZ_MAX_PROMPT_CHARS", "20", ["trace"], "TXVIZ_MAX_PROMPT_CHARS"),
    ("TXVIZ_MAX_LONG_TOKENS", "5", ["trace"], "TXVIZ_MAX_LONG_TOKENS"),
    ("TXVIZ_MAX_LONG_TOKENS", "5", ["trace", "--plan"], "TXVIZ_MAX_LONG_TOKENS"),  # a plan promises no more
    ("TXVIZ_MAX_PROMPT_CHARS", "20", ["generate"], "TXVIZ_MAX_PROMPT_CHARS"),
    ("TXVIZ_MAX_TOKENS", "5", ["generate", "--max-new-tokens", "1"], "TXVIZ_MAX_TOKENS"),
    ("TXVIZ_MAX_NEW_TOKENS", "2", ["generate", "--max-new-tokens", "3"], "TXVIZ_MAX_NEW_TOKENS"),
])
def test_the_command_line_applies_the_app_s_limits(capsys, monkeypatch, env, value, argv, named):
    monkeypatch.setenv(env, value)
    assert main([*argv, "--prompt", PROMPT, "--model", MODEL, "--device", "cpu", "--json"]) != 0
    assert json.loads(capsys.readouterr().out)["type"] == "LimitExceeded"  # --json: the error as JSON
    monkeypatch.setenv(env, value)
    assert main([*argv, "--prompt", PROMPT, "--model", MODEL, "--device", "cpu"]) != 0
    assert named in capsys.readouterr().err


def test_a_plan_past_the_model_s_context_is_refused_like_the_run(capsys, monkeypatch):
    context = load(MODEL, device="cpu").config.max_seq_len
    monkeypatch.setenv("TXVIZ_MAX_PROMPT_CHARS", str(10 * context))
    for extra in ([], ["--plan"]):
        assert main(["trace", "--prompt", "dog " * context, "--model", MODEL, "--device", "cpu", *extra]) != 0
        assert "context" in capsys.readouterr().err


def test_bos_defaults_to_the_app_s_sink_and_auto_follows_the_model_s_own_tokenizer(capsys):
    from types import SimpleNamespace

    from txviz.cli.prompts import resolve_bos

    # the default was once auto (nothing, for SmolLM2) where the app's sidebar prepends the sink token
    default = run(capsys)
    assert default["bos"] == "sink" and default["tokens"][0]["text"] == "<|endoftext|>"
    assert default["heads"] == run(capsys, "--bos", "sink")["heads"]
    assert run(capsys, "--bos", "auto")["bos"] == "none"  # the zoo's tokenizer, like SmolLM2's, prepends nothing
    assert resolve_bos("app", SimpleNamespace(sink_id=None)) == "none"  # no sink token: nothing, rather than an error
    gemma_like = SimpleNamespace(adds_bos=True, bos_id=2)
    assert resolve_bos("auto", gemma_like) == "bos"
    assert resolve_bos("auto", SimpleNamespace(adds_bos=True, bos_id=None)) == "none"  # nothing to prepend
    assert [resolve_bos(choice, gemma_like) for choice in ("none", "bos", "sink")] == ["none", "bos", "sink"]


@pytest.mark.parametrize("prompt", ["", "   \n"])
def test_an_empty_prompt_is_refused_as_the_app_refuses_it(capsys, monkeypatch, prompt):
    from txviz.cli import model_options

    loads = []
    monkeypatch.setattr(model_options, "load_model", lambda args: loads.append(args))
    assert main(["trace", "--prompt", prompt, "--model", MODEL, "--json"]) == 2
    assert "prompt is empty" in json.loads(capsys.readouterr().out)["error"] and not loads
