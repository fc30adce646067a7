"""On SmolLM2-135M (e2e): DLA adds up on the trophy pair, and ``txviz patch --json`` reports it with the
first tokens of " trophy" and " suitcase" named (" suitcase" is two tokens: " suit" + "case"), with the
residual grid the app shows (the session's causal memo: the pair is measured once for this test, the
Heads page's AppTest and its browser test)."""

from __future__ import annotations

import json

import pytest
import torch

from txviz import cli
from txviz.cli import model_options
from txviz.causal.bench import TROPHY
from txviz.causal.dla import direct_logit_attribution
from txviz.causal.metric import answer_tokens

CLEAN, CORRUPT, ANSWER, WRONG = TROPHY


def test_dla_sums_to_the_logit_difference(default_model):
    tokens = answer_tokens(default_model.tokenizer, ANSWER, WRONG)
    ids = torch.tensor(list(default_model.tokenizer.encode(CLEAN, bos="sink").ids))
    dla = direct_logit_attribution(default_model.model, ids, tokens.answer_id, tokens.wrong_id)
    assert dla.heads.shape == (30, 9) and dla.bias == 0.0
    assert dla.parts_sum == pytest.approx(dla.total, abs=1e-3)


def test_cli_patch_on_the_trophy_pair(default_model, causal_memo, monkeypatch, capsys):
    asked = []

    def session_model(args):  # the session's load of the default model (loading it is the loading tests' part)
        asked.append(args.model)
        return default_model

    monkeypatch.setattr(model_options, "load_model", session_model)
    assert cli.main(["patch", "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", ANSWER, "--wrong", WRONG,
                     "--candidates", "trophy,suitcase", "--grid", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert asked == [None]  # no --model: the default model
    assert out["n_tokens"] == 24
    assert out["answer_token"]["text"] == " trophy" and out["wrong_token"]["text"] == " suit"
    assert out["clean_logit_diff"] > out["corrupt_logit_diff"]  # big → the trophy; small pulls toward the suitcase
    parts = out["embed_dla"] + sum(h["dla"] for h in out["heads"]) + sum(m["dla"] for m in out["mlps"])
    assert parts == pytest.approx(out["clean_logit_diff"], abs=1e-3)
    assert len(out["heads"]) == 270 and all(h["attention_margin"] is not None for h in out["heads"])
    assert out["attribution_agreement"]["k"] == 10
    assert len(out["residual_grid"]) == 30 and {len(row) for row in out["residual_grid"]} == {24}


def test_cli_patch_reads_words_typed_without_a_space_as_the_app_does(default_model, causal_memo, monkeypatch, capsys):
    monkeypatch.setattr(model_options, "load_model", lambda args: default_model)
    scored = []
    for answer, wrong in ((ANSWER, WRONG), (ANSWER.strip(), WRONG.strip())):  # " trophy", then "trophy"
        assert cli.main(["patch", "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", answer, "--wrong", wrong,
                         "--candidates", "trophy,suitcase", "--grid", "--json"]) == 0
        scored.append(json.loads(capsys.readouterr().out))
    spaced, typed = scored
    assert typed["answer_token"] == spaced["answer_token"] and typed["wrong_token"]["of"] == [" suit", "case"]
    assert typed["clean_logit_diff"] == spaced["clean_logit_diff"]
