"""``txviz patch --json`` on the zoo's base_long: the promised fields, DLA adding up, the tokens named,
and clear errors (no traceback) for prompts of different token lengths, empty or unknown words."""

from __future__ import annotations

import json

import pytest

from txviz import cli
from txviz.cli import model_options
from txviz.loading.zoo import SHIPPED_ZOO

MODEL = str(SHIPPED_ZOO / "base_long")
CLEAN = "Mary gave the book to John. John gave it back to"
CORRUPT = "Mary gave the book to John. Mary gave it back to"


def run(capsys, *args: str) -> tuple[int, dict]:
    code = cli.main(["patch", "--model", MODEL, "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_patch_json_report(capsys):
    code, out = run(capsys, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", " Mary", "--wrong", " John",
                    "--candidates", "Mary,John", "--pronoun", "it", "--grid", "--chunk-size", "5")
    assert code == 0
    assert out["answer_token"]["text"] == "Mary" and out["wrong_token"]["text"] == "John"
    assert out["clean_logit_diff"] > out["corrupt_logit_diff"]  # swapping the giver moves the answer
    heads, mlps = out["heads"], out["mlps"]
    assert len(heads) == 16 and len(mlps) == 4
    assert set(heads[0]) >= {"layer", "head", "dla", "ablation", "patching", "attention_margin"}
    parts = out["embed_dla"] + out["bias_dla"] + sum(h["dla"] for h in heads) + sum(m["dla"] for m in mlps)
    assert parts == pytest.approx(out["clean_logit_diff"], abs=1e-4)
    assert all(isinstance(h["attention_margin"], float) for h in heads)
    assert any(abs(h["patching"]) > 0.1 for h in heads)
    assert len(out["residual_grid"]) == 4 and len(out["residual_grid"][0]) == out["n_tokens"]
    # patching the whole residual entering layer 0 at the one changed position is the corrupt run
    changed = next(i for i, (a, b) in enumerate(zip(out["clean_tokens"], out["corrupt_tokens"])) if a != b)
    shift = out["corrupt_logit_diff"] - out["clean_logit_diff"]
    assert out["residual_grid"][0][changed] == pytest.approx(shift, abs=1e-4)
    assert -1 <= out["attribution_agreement"]["spearman"] <= 1


def test_without_candidates_the_margin_is_null(capsys):
    code, out = run(capsys, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", " Mary", "--wrong", " John")
    assert code == 0 and all(h["attention_margin"] is None for h in out["heads"])


@pytest.mark.parametrize("args, message", [
    (("--corrupt", CORRUPT + " him", "--answer", " Mary", "--wrong", " John"), "same token length"),
    (("--corrupt", CORRUPT, "--answer", " ", "--wrong", " John"), "answer word is empty"),
    (("--corrupt", CORRUPT, "--answer", " Mary", "--wrong", " Johnny"), "not in the model's vocabulary"),
    (("--corrupt", CORRUPT, "--answer", " Mary", "--wrong", " Mary"), "same token"),
    (("--corrupt", "", "--answer", " Mary", "--wrong", " John"), "corrupt prompt is empty"),
    (("--corrupt", CORRUPT, "--answer", " Mary", "--wrong", " John", "--candidates", "Mary"), "at least two"),
])
def test_clear_errors(capsys, args, message):
    code, out = run(capsys, "--clean", CLEAN, *args)
    assert code == 2 and message in out["error"]


@pytest.mark.parametrize("env, value, named", [
    ("TXVIZ_MAX_PROMPT_CHARS", "20", "TXVIZ_MAX_PROMPT_CHARS"),
    ("TXVIZ_MAX_TOKENS", "5", "TXVIZ_MAX_TOKENS"),
    ("TXVIZ_MEMORY_BUDGET", "64KiB", "TXVIZ_MEMORY_BUDGET"),
])
def test_patch_applies_the_app_s_limits_before_any_pass(capsys, monkeypatch, env, value, named):
    from txviz.causal import report

    ran = []
    monkeypatch.setattr(report, "measure_pair", lambda *a, **k: ran.append(1))
    monkeypatch.setenv(env, value)
    code, out = run(capsys, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "Mary", "--wrong", "John")
    assert code == 2 and out["type"] == "LimitExceeded" and named in out["error"] and not ran


def test_patch_reports_the_estimate_the_app_s_causal_run_checks(capsys):
    from app.services.causal import estimate
    from txviz import limits
    from txviz.loading import load

    code, out = run(capsys, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "Mary", "--wrong", "John",
                    "--candidates", "Mary,John", "--grid")  # the app's run: margins and the residual grid
    loaded = load(MODEL)
    ids = [loaded.tokenizer.encode(text, bos="sink").ids for text in (CLEAN, CORRUPT)]
    app = estimate(loaded, *ids, limits.current())
    assert code == 0 and out["estimate"] == {"bytes": app.bytes, "seconds": round(app.seconds, 2)}


@pytest.mark.parametrize("flag, value", [("--top", "-5"), ("--top", "0"), ("--chunk-size", "0"), ("--top", "x")])
def test_counts_are_refused_when_the_command_line_is_read(capsys, monkeypatch, flag, value):
    loads = []
    monkeypatch.setattr(model_options, "load_model", lambda args: loads.append(args))
    with pytest.raises(SystemExit) as refused:
        cli.main(["patch", "--model", MODEL, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "Mary",
                  "--wrong", "John", flag, value])
    assert refused.value.code == 2 and flag in capsys.readouterr().err and not loads


def test_an_empty_prompt_is_refused_before_the_model_loads(capsys, monkeypatch):
    loads = []
    monkeypatch.setattr(model_options, "load_model", lambda args: loads.append(args))
    code, out = run(capsys, "--clean", "  ", "--corrupt", CORRUPT, "--answer", "Mary", "--wrong", "John")
    assert code == 2 and "clean prompt is empty" in out["error"] and not loads


def test_the_text_output_names_the_tokens_scored(capsys):
    assert cli.main(["patch", "--model", MODEL, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "Mary",
                     "--wrong", "John", "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()  # after the no-flip warning, when there is one (it comes first)
    scored = next(line for line in lines if line.startswith("scored by"))
    assert scored == "scored by first tokens: answer 'Mary', wrong 'John'"
    assert lines.index(scored) < lines.index("layer  head  patching  ablation     dla")
