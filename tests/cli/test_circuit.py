"""``txviz circuit --json`` and ``txviz qk --json`` (txviz/cli/circuit.py) on the zoo's base_long: the promised keys, the curve
from the corrupt run to the clean one, the pairs adding up to the model's own score, the same words and
token numbering as ``txviz patch`` and ``txviz trace``, and refusals before any pass."""

from __future__ import annotations

import json

import pytest
import torch

from txviz import cli, trace
from txviz.cli import model_options
from txviz.circuit.graph import CircuitGraph
from txviz.loading import load
from txviz.loading.zoo import SHIPPED_ZOO

MODEL = str(SHIPPED_ZOO / "base_long")
CLEAN = "Mary gave the book to John. John gave it back to"
CORRUPT = "Mary gave the book to John. Mary gave it back to"
PAIR = ("--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "Mary", "--wrong", "John")


def run(capsys, command: str, *args: str) -> tuple[int, dict]:
    code = cli.main([command, "--model", MODEL, "--json", *args])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def smallest(tmp_path_factory):
    """The default report (the smallest circuit reaching 0.8), run once for the tests that read it."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["circuit", "--model", MODEL, "--json", *PAIR, "--top", "1000"]) == 0
    return json.loads(out.getvalue())


def test_circuit_json_keys_and_curve_from_corrupt_to_clean(smallest):
    out = smallest
    assert {"clean_metric", "corrupt_metric", "edges", "curve", "circuit"} <= set(out)
    graph = CircuitGraph(load(MODEL).config)
    assert out["n_edges"] == graph.n_edges
    curve = out["curve"]
    assert [p["edges"] for p in curve] == sorted(p["edges"] for p in curve)
    assert curve[0]["edges"] == 0 and curve[0]["faithfulness"] == pytest.approx(0.0, abs=1e-4)
    assert curve[-1]["edges"] == graph.n_edges and curve[-1]["faithfulness"] == pytest.approx(1.0, abs=1e-4)
    scores = [abs(e["score"]) for e in out["edges"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == min(1000, graph.n_edges)
    for edge in out["edges"]:
        assert set(edge) == {"source", "target", "input", "score"}
        assert (edge["input"] in ("q", "k", "v")) == edge["target"].startswith("a")  # heads take q, k or v
        graph.edge_mask([(edge["source"], edge["target"], edge["input"])])  # a real edge of the graph


def test_the_smallest_circuit_reaches_its_target_with_its_edges_listed(smallest):
    circuit = smallest["circuit"]
    assert circuit["target"] == 0.8 and circuit["faithfulness"] >= 0.8
    assert len(circuit["edges"]) == circuit["n_edges"] < smallest["n_edges"]
    assert circuit["edges"] == smallest["edges"][:circuit["n_edges"]]  # the top n by |score|


def test_the_words_and_metrics_are_those_of_txviz_patch(capsys, smallest):
    code, patch = run(capsys, "patch", *PAIR)
    assert code == 0
    assert smallest["answer_token"] == patch["answer_token"] and smallest["wrong_token"] == patch["wrong_token"]
    assert smallest["clean_metric"] == pytest.approx(patch["clean_logit_diff"], abs=1e-4)
    assert smallest["corrupt_metric"] == pytest.approx(patch["corrupt_logit_diff"], abs=1e-4)
    assert smallest["flips"] == (patch["clean_logit_diff"] > 0 > patch["corrupt_logit_diff"])


def test_a_circuit_of_a_given_size_is_measured_on_the_curve(capsys):
    code, out = run(capsys, "circuit", *PAIR, "--edges", "37", "--steps", "2")
    assert code == 0 and out["steps"] == 2
    circuit = out["circuit"]
    assert circuit["n_edges"] == 37 and circuit["target"] is None and len(circuit["edges"]) == 37
    point = next(p for p in out["curve"] if p["edges"] == 37)
    assert circuit["faithfulness"] == point["faithfulness"]


def test_qk_pairs_sum_to_the_model_s_own_score_numbered_as_trace(capsys):
    prompt, layer, head, query, key = CLEAN, 2, 1, 10, 1
    code, out = run(capsys, "qk", "--prompt", prompt, "--layer", str(layer), "--head", str(head),
                    "--query", str(query), "--key", str(key), "--top", "100000")
    assert code == 0
    code, traced = run(capsys, "trace", "--prompt", prompt)
    assert [t["text"] for t in traced["tokens"]] == out["tokens"] and out["bos"] == traced["bos"]
    loaded = load(MODEL)
    ids = torch.tensor([t["id"] for t in traced["tokens"]])
    logits = trace(loaded.model, ids, capture=("attn_logits",), layers=[layer])["attn_logits"][0, 0]
    assert out["score"] == pytest.approx(float(logits[head, query, key]), abs=1e-5)
    assert out["sum"] == pytest.approx(out["score"], abs=1e-4)
    values = [p["value"] for p in out["pairs"]]
    assert len(values) == out["n_pairs"] and sum(values) == pytest.approx(out["sum"], abs=1e-4)
    assert [abs(v) for v in values] == sorted((abs(v) for v in values), reverse=True)
    for side in ("query_side", "key_side"):  # each side's totals hold every pair once
        assert sum(n["value"] for n in out[side]) == pytest.approx(out["sum"], abs=1e-4)
    assert out["query_token"] == out["tokens"][query] and out["key_token"] == out["tokens"][key]


@pytest.mark.parametrize("command, args, message", [
    ("circuit", ("--clean", CLEAN, "--corrupt", CORRUPT + " him", "--answer", "Mary", "--wrong", "John"),
     "same token length"),
    ("circuit", ("--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "Mary", "--wrong", "Johnny"),
     "not in the model's vocabulary"),
    ("circuit", (*PAIR, "--edges", "100000"), "edges"),
    ("qk", ("--prompt", CLEAN, "--layer", "9", "--head", "0", "--query", "3", "--key", "1"), "no head"),
    ("qk", ("--prompt", CLEAN, "--layer", "1", "--head", "0", "--query", "3", "--key", "5"), "masked"),
])
def test_clear_errors(capsys, command, args, message):
    code, out = run(capsys, command, *args)
    assert code == 2 and message in out["error"]


@pytest.mark.parametrize("command, args, flag, value", [
    ("circuit", PAIR, "--steps", "0"), ("circuit", PAIR, "--edges", "0"), ("circuit", PAIR, "--target", "1.5"),
    ("circuit", PAIR, "--target", "0"), ("circuit", PAIR, "--top", "x"),
    ("qk", ("--prompt", CLEAN, "--head", "0", "--query", "3", "--key", "1"), "--layer", "-1"),
    ("qk", ("--prompt", CLEAN, "--layer", "0", "--head", "0", "--key", "1"), "--query", "x"),
])
def test_arguments_are_refused_when_the_command_line_is_read(capsys, monkeypatch, command, args, flag, value):
    loads = []
    monkeypatch.setattr(model_options, "load_model", lambda args: loads.append(args))
    with pytest.raises(SystemExit) as refused:
        cli.main([command, "--model", MODEL, *args, flag, value])
    assert refused.value.code == 2 and flag in capsys.readouterr().err and not loads


@pytest.mark.parametrize("env, value, named", [
    ("TXVIZ_MAX_PROMPT_CHARS", "20", "TXVIZ_MAX_PROMPT_CHARS"),
    ("TXVIZ_MAX_TOKENS", "5", "TXVIZ_MAX_TOKENS"),
    ("TXVIZ_MEMORY_BUDGET", "64KiB", "TXVIZ_MEMORY_BUDGET"),
])
def test_circuit_and_qk_apply_the_app_s_limits_before_any_pass(capsys, monkeypatch, env, value, named):
    from txviz.circuit import report

    ran = []
    monkeypatch.setattr(report, "measure_circuit", lambda *a, **k: ran.append(1))
    monkeypatch.setattr(report, "qk_attribution", lambda *a, **k: ran.append(1))
    monkeypatch.setenv(env, value)
    for command, args in (("circuit", PAIR), ("qk", ("--prompt", CLEAN, "--layer", "1", "--head", "0", "--query",
                                                     "3", "--key", "1"))):
        code, out = run(capsys, command, *args)
        assert code == 2 and out["type"] == "LimitExceeded" and named in out["error"] and not ran


def test_the_text_output_says_when_the_pair_does_not_flip(capsys):
    same_answer = ("--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "John", "--wrong", "book", "--edges", "20")
    assert cli.main(["circuit", "--model", MODEL, *same_answer]) == 0
    lines = capsys.readouterr().out.splitlines()
    code, out = run(capsys, "circuit", *same_answer)
    flips = out["flips"]
    assert any("does not flip" in line for line in lines) == (not flips)
