"""Coreference heads (txviz.analysis.coref.ranking): reading cases, locating spans, scoring heads, the CLI."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.byte_tokenizer import SINK, ByteLevelTokenizer
from txviz import cli
from txviz.cli import model_options
from txviz.analysis.coref import data as coref_data
from txviz.analysis.coref.ranking import (BUILTIN_PATH, CorefCase, CorefDataError, _batches, answer_margin,
                                  baseline_accuracy, builtin_cases, evaluate, locate, parse_cases, rank_for_sentence,
                                  rank_heads, score_heads, token_span)
from txviz.config import ModelConfig
from txviz.loading.loaded import LoadedModel
from txviz.model.transformer import Decoder


# ---- a tiny random model on a real byte-level BPE tokenizer (tests/helpers/byte_tokenizer.py) ------

@pytest.fixture(scope="module")
def tokenizer():
    return ByteLevelTokenizer()


@pytest.fixture(scope="module")
def tiny(tokenizer):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                         ffn_hidden=64, name="tiny")
    model = Decoder(config).eval()
    return LoadedModel(model=model, tokenizer=tokenizer, config=config, source="tiny", format="test")


def line(**fields) -> str:
    record = {"text": "Mary called John because she was late.", "pronoun": "she",
              "candidates": ["Mary", "John"], "answer": "Mary"}
    record.update(fields)
    return json.dumps({k: v for k, v in record.items() if v is not None})


# ---- reading cases ---------------------------------------------------------------------------------

def test_parse_cases_reads_lines_and_files(tmp_path):
    lines = [line(), "", line(text="John met Mary. She smiled and she left.", pronoun="she",
                              pronoun_occurrence=0, answer="Mary", kind="gender")]
    cases = parse_cases(lines)
    assert [c.answer for c in cases] == ["Mary", "Mary"]
    assert cases[0].candidates == ("Mary", "John") and cases[1].kind == "gender"
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert parse_cases(path) == cases == parse_cases(str(path))


@pytest.mark.parametrize("bad, message", [
    ('{"text": "Mary called John because she was late."', "line 2: malformed JSON"),
    ('["a list"]', "line 2: expected a JSON object"),
    (line(answer=None), "line 2: missing field(s) 'answer'"),
    (line(answers="Mary"), "line 2: unknown field(s) 'answers'"),
    (line(answer="Sue"), "answer 'Sue' is not among the candidates"),
    (line(candidates=["Mary"]), "need at least 2 candidates"),
    (line(candidates=["Mary", "Mary"]), "candidates repeat"),
    (line(candidates="Mary"), "'candidates' must be a list"),
    (line(pronoun="he"), "pronoun 'he' occurs 0 time(s)"),
    (line(pronoun="She"), "case-sensitive"),
    (line(pronoun_occurrence=1), "pronoun_occurrence=1 needs at least 2"),
    (line(pronoun_occurrence=-1), "must be an integer >= 0"),
    (line(pronoun_occurrence=True), "must be an integer >= 0"),
    (line(candidates=["Mary", "Jo"]), "candidate 'Jo' is not in the text as a whole word"),
    (line(candidates=["Mary", "Mary called"]), "overlap"),
    (line(text=""), "'text' must be a non-empty string"),
])
def test_parse_cases_rejects_with_the_line_number(bad, message):
    with pytest.raises(CorefDataError, match="line 2") as error:
        parse_cases([line(), bad])
    assert message in str(error.value)


def test_parse_cases_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such coreference data file"):
        parse_cases(tmp_path / "missing.jsonl")
    with pytest.raises(CorefDataError, match="not a file"):
        parse_cases(tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(CorefDataError, match="no cases"):
        parse_cases(tmp_path / "empty.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes('{"text": "Zoë"}'.encode("latin-1"))
    with pytest.raises(CorefDataError, match="not UTF-8"):
        parse_cases(tmp_path / "latin1.jsonl")


def test_candidates_after_the_pronoun_are_allowed_but_flagged():
    case = CorefCase("Before she left, Mary called John.", "she", ("Mary", "John"), "Mary")
    assert case.after_pronoun == ("Mary", "John")
    assert baseline_accuracy([case]) == {"nearest": 0.0, "first": 1.0}
    assert parse_cases([line()])[0].after_pronoun == ()


def test_whole_word_matching_and_occurrence():
    case = CorefCase("Ann saw Anna, and then she saw her; she waved.", "she", ("Ann", "Anna"), "Anna",
                     pronoun_occurrence=1)
    assert case.candidate_chars == ((0, 3), (8, 12))
    assert case.pronoun_chars == (36, 39)


# ---- from characters to tokens ---------------------------------------------------------------------

def test_locate_covers_every_token_of_a_candidate(tokenizer):
    case = CorefCase("Mary met John; she smiled.", "she", ("Mary", "John"), "John")
    encoding = tokenizer.encode(case.text, bos="sink")
    spans = locate(case, encoding)
    assert encoding.tokens[0] == SINK
    assert [encoding.tokens[i] for i in spans.candidates[0]] == ["Mary"]
    assert [encoding.tokens[i] for i in spans.candidates[1]] == ["J", "o", "h", "n"]  # not the space before
    assert encoding.tokens[spans.pronoun_row] == "Ġshe"
    assert spans.answer == 1
    unshifted = locate(case, tokenizer.encode(case.text, bos="none"))
    assert unshifted.pronoun_row == spans.pronoun_row - 1


def test_locate_takes_the_pronouns_last_token_and_multibyte_characters(tokenizer):
    case = CorefCase("Zoë met Mary, then Zoë left.", "Zoë", ("Mary", "met"), "Mary", pronoun_occurrence=1)
    encoding = tokenizer.encode(case.text)
    spans = locate(case, encoding)
    pronoun_tokens = token_span(encoding.offsets, *case.pronoun_chars)
    assert len(pronoun_tokens) == 4  # "Z", "o", and the two bytes of "ë" (not the space before)
    assert spans.pronoun_row == pronoun_tokens[-1]
    assert token_span(encoding.offsets, 0, 3) == (0, 1, 2, 3)  # first "Zoë", both bytes of "ë"


def test_token_span_skips_special_and_empty_tokens():
    offsets = [(0, 0), (0, 4), (4, 9)]
    assert token_span(offsets, 0, 4) == (1,)
    assert token_span(offsets, 0, 4, special=[False, True, False]) == ()


# ---- scoring heads ---------------------------------------------------------------------------------

def one_hot_rows(n_layers: int, n_heads: int, t: int, row: int, targets: dict) -> torch.Tensor:
    """(L, H, T, T) uniform causal attention, except row ``row`` of each (layer, head) in ``targets``
    puts its weights on the given keys."""
    probs = torch.tril(torch.ones(t, t))
    probs = (probs / probs.sum(-1, keepdim=True)).expand(n_layers, n_heads, t, t).clone()
    for (layer, head), weights in targets.items():
        probs[layer, head, row] = 0
        for key, weight in weights.items():
            probs[layer, head, row, key] = weight
    return probs


def test_rank_heads_sums_over_candidate_tokens():
    probs = one_hot_rows(2, 3, 6, row=5, targets={(0, 1): {1: 0.3, 2: 0.3, 4: 0.4}, (1, 2): {3: 0.9, 0: 0.1}})
    mass = rank_heads(probs, 5, [(1, 2), (3, 4)])
    assert mass.shape == (2, 3, 2)
    torch.testing.assert_close(mass[0, 1], torch.tensor([0.6, 0.4]))
    torch.testing.assert_close(mass[1, 2], torch.tensor([0.0, 0.9]))
    torch.testing.assert_close(mass[0, 0], torch.tensor([2 / 6, 2 / 6]))
    margin = answer_margin(mass, 0)
    assert margin[0, 1] == pytest.approx(0.2) and margin[1, 2] == pytest.approx(-0.9)
    assert margin[0, 0] == 0  # a tie: counted as wrong
    with pytest.raises(ValueError, match="out of range"):
        rank_heads(probs, 5, [(1,), (6,)])
    with pytest.raises(ValueError, match="empty"):
        rank_heads(probs, 5, [(1,), ()])


def test_score_heads_ranks_by_margin_for_the_target():
    probs = one_hot_rows(2, 2, 6, row=5, targets={(1, 0): {1: 0.8, 3: 0.2}, (0, 1): {1: 0.5, 3: 0.5},
                                                  (1, 1): {1: 0.1, 3: 0.7, 4: 0.2}})
    heads = score_heads(probs, 5, [(1,), (3,)], target=0)
    assert (heads[0].layer, heads[0].head, heads[0].predicted) == (1, 0, 0)
    assert heads[0].mass == pytest.approx((0.8, 0.2)) and heads[0].margin == pytest.approx(0.6)
    tie = next(h for h in heads if (h.layer, h.head) == (0, 1))
    assert tie.predicted is None and tie.margin == 0
    assert [h.margin for h in heads] == sorted((h.margin for h in heads), reverse=True)
    best_for_second = score_heads(probs, 5, [(1,), (3,)], target=1)[0]
    assert (best_for_second.layer, best_for_second.head, best_for_second.predicted) == (1, 1, 1)
    with pytest.raises(ValueError, match="share token"):
        score_heads(probs, 5, [(1, 2), (2, 3)])
    with pytest.raises(ValueError, match="pronoun's token"):
        score_heads(probs, 5, [(1,), (5,)])
    with pytest.raises(ValueError, match="at least 2"):
        score_heads(probs, 5, [(1,)])


def test_evaluate_schema_and_sorting(tiny):
    cases = builtin_cases()[::8]
    result = evaluate(tiny, cases, bos="sink")
    assert set(result) >= {"n_cases", "baselines", "heads"} and result["n_cases"] == len(cases)
    assert set(result["baselines"]) == {"nearest", "first"}
    assert len(result["heads"]) == 2 * 4
    assert all(set(row) == {"layer", "head", "accuracy", "margin"} for row in result["heads"])
    keys = [(-row["accuracy"], -row["margin"]) for row in result["heads"]]
    assert keys == sorted(keys)
    assert all(0 <= row["accuracy"] <= 1 and -1 <= row["margin"] <= 1 for row in result["heads"])
    kinds = {c.kind for c in cases}
    assert set(result["by_kind"]) == kinds and sum(k["n_cases"] for k in result["by_kind"].values()) == len(cases)


def test_batches_group_by_length_within_the_budget():
    assert list(_batches([10, 200, 12, 11], batch_size=2)) == [[0, 3], [2], [1]]
    assert list(_batches([10, 200, 12], batch_size=16)) == [[0, 2], [1]]  # 3 · 200² > MAX_BATCH_CELLS


def test_evaluate_reports_each_batch_to_the_hook(tiny):
    from txviz.batches import batch_done, between_batches

    seen, outer = [], []
    with between_batches(lambda done, total: outer.append(done)), between_batches(lambda *a: seen.append(a)):
        evaluate(tiny, builtin_cases()[::8], batch_size=4)
    batch_done(1, 1)  # outside the block: nobody is called
    n = len(seen)
    assert n == len(list(_batches([1] * 30, 4))) and seen == [(i, n) for i in range(1, n + 1)]
    assert outer == list(range(1, n + 1))  # the outer hook is called too


def test_evaluate_batching_changes_nothing(tiny):
    """Right padding is invisible to a causal model's real rows."""
    cases = builtin_cases()[::12]
    one, many = (evaluate(tiny, cases, batch_size=size) for size in (1, 7))
    for a, b in zip(sorted(one["heads"], key=lambda r: (r["layer"], r["head"])),
                    sorted(many["heads"], key=lambda r: (r["layer"], r["head"]))):
        assert a["accuracy"] == b["accuracy"] and a["margin"] == pytest.approx(b["margin"], abs=1e-5)


def test_evaluate_agrees_with_one_sentence_ranking(tiny):
    case = CorefCase("Mary met John; she smiled.", "she", ("Mary", "John"), "Mary")
    spans = locate(case, tiny.tokenizer.encode(case.text, bos="sink"))
    ranking = rank_for_sentence(tiny, case.text, spans.pronoun_row, spans.candidates, target=0)
    result = evaluate((tiny.model, tiny.tokenizer), [case])
    by_head = {(h.layer, h.head): h for h in ranking.heads}
    for row in result["heads"]:
        assert row["margin"] == pytest.approx(by_head[row["layer"], row["head"]].margin, abs=1e-5)
    assert ranking.tokens[0] == SINK and len(ranking.heads) == 8


# ---- the built-in set ------------------------------------------------------------------------------

def test_generator_reproduces_the_shipped_file():
    assert coref_data.to_jsonl(coref_data.generate_cases()) == BUILTIN_PATH.read_text(encoding="utf-8")


def test_builtin_set_is_balanced_and_decidable_from_the_left():
    cases = builtin_cases()
    assert 150 <= len(cases) <= 300 and len({c.text for c in cases}) == len(cases)
    assert baseline_accuracy(cases) == {"nearest": 0.5, "first": 0.5}
    for kind in ("gender", "number", "animacy"):
        subset = [c for c in cases if c.kind == kind]
        assert len(subset) >= 50 and baseline_accuracy(subset) == {"nearest": 0.5, "first": 0.5}
    assert not any(c.after_pronoun for c in cases)


# ---- the CLI ---------------------------------------------------------------------------------------

@pytest.fixture
def tiny_cli(tiny, monkeypatch):
    monkeypatch.setattr(model_options, "load_model", lambda args: tiny)


def test_cli_coref_json(tiny_cli, capsys, tmp_path):
    assert cli.main(["coref", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_cases"] == len(builtin_cases()) and result["bos"] == "sink"
    assert result["baselines"] == {"nearest": 0.5, "first": 0.5} and len(result["heads"]) == 8
    path = tmp_path / "mine.jsonl"
    path.write_text(line() + "\n" + line(answer="John", pronoun="was", text="Mary called John, who was late.") + "\n")
    assert cli.main(["coref", "--data", str(path), "--bos", "none", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_cases"] == 2 and result["bos"] == "none" and result["data"] == str(path)


def test_cli_coref_table_respects_top(tiny_cli, capsys):
    assert cli.main(["coref", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "baselines: nearest 0.500, first 0.500" in out
    assert len(out.strip().splitlines()) == 3 + 3


@pytest.mark.parametrize("content, message", [("{not json\n", "line 1: malformed JSON"),
                                              (line(answer="Sue") + "\n", "line 1: answer 'Sue'"),
                                              ("[" * 200_000 + "]" * 200_000 + "\n", "line 1: the JSON is nested too deeply")])
def test_cli_coref_bad_file_exits_2(tiny_cli, capsys, tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert cli.main(["coref", "--data", str(path), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)
    assert message in error["error"] and error["type"] == "CorefDataError"
    assert cli.main(["coref", "--data", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such coreference data file" in capsys.readouterr().err


@pytest.mark.parametrize("env, value, loaded", [("TXVIZ_MAX_PROMPT_CHARS", "20", False), ("TXVIZ_MAX_TOKENS", "5", True),
                                               ("TXVIZ_MEMORY_BUDGET", "4KiB", True)])
def test_cli_coref_applies_the_app_s_limits(tiny, capsys, monkeypatch, env, value, loaded):
    from txviz.analysis.coref import ranking

    loads, ran = [], []
    monkeypatch.setattr(model_options, "load_model", lambda args: loads.append(args) or tiny)
    monkeypatch.setattr(ranking, "case_margins", lambda *a, **k: ran.append(1))
    monkeypatch.setenv(env, value)
    assert cli.main(["coref", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)
    assert error["type"] == "LimitExceeded" and env in error["error"]
    assert bool(loads) == loaded and not ran  # characters are counted before the model loads


@pytest.mark.parametrize("top", ["-5", "0"])
def test_cli_coref_top_is_refused_when_the_command_line_is_read(tiny_cli, capsys, top):
    with pytest.raises(SystemExit) as refused:
        cli.main(["coref", "--top", top])
    assert refused.value.code == 2 and "--top" in capsys.readouterr().err


# ---- the default model (SmolLM2-135M-Instruct) -----------------------------------------------------

@pytest.mark.default_model
def test_builtin_candidates_are_clean_token_spans_in_smollm2(default_model):
    for case in builtin_cases():
        encoding = default_model.tokenizer.encode(case.text, bos="sink")
        spans = locate(case, encoding)
        for word, span in zip(case.candidates, spans.candidates):
            assert "".join(encoding.tokens[i] for i in span).strip() == word
        assert encoding.tokens[spans.pronoun_row].strip() == case.pronoun


# SmolLM2's figures on the built-in set are checked on the one evaluation the Heads page runs
# (tests/app/pages/heads/test_heads_coref.py, assert_default_model_has_coreference_heads), not on a second one here.
