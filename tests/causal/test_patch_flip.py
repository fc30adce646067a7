"""``txviz patch`` says when the counterfactual does not flip the answer: the JSON carries the flag and
both logit differences, the text says so on its first line, before the ranking; on the zoo's base_long
with no token before the prompts (the pair flips with " Mary" as the answer; the same pair read the other way
round does not)."""

from __future__ import annotations

import json

from txviz import cli
from txviz.loading.zoo import SHIPPED_ZOO

MODEL = str(SHIPPED_ZOO / "base_long")
CLEAN = "Mary gave the book to John. John gave it back to"
CORRUPT = "Mary gave the book to John. Mary gave it back to"


def patch(capsys, answer: str, wrong: str, *extra: str) -> str:
    code = cli.main(["patch", "--model", MODEL, "--clean", CLEAN, "--corrupt", CORRUPT, "--answer", answer,
                     "--wrong", wrong, "--bos", "none", *extra])
    assert code == 0
    return capsys.readouterr().out


def test_the_json_carries_whether_the_answer_flips(capsys):
    flips = json.loads(patch(capsys, " Mary", " John", "--json"))
    assert flips["clean_logit_diff"] > 0 > flips["corrupt_logit_diff"]
    assert flips["answer_flip"]["flips"] is True
    assert flips["answer_flip"]["clean_logit_diff"] == flips["clean_logit_diff"]
    stays = json.loads(patch(capsys, " John", " Mary", "--json"))  # the sentence prefers the "wrong" word
    assert stays["answer_flip"]["flips"] is False
    assert (stays["answer_flip"]["clean_prefers"], stays["answer_flip"]["corrupt_prefers"]) == ("wrong", "answer")


def test_the_text_says_it_first_with_both_logit_differences(capsys):
    lines = patch(capsys, " John", " Mary").splitlines()
    assert lines[0].startswith("NOT A FINDING. The counterfactual does not flip the answer")
    assert lines.index("layer  head  patching  ablation     dla") > 0
    report = json.loads(patch(capsys, " John", " Mary", "--json"))
    assert f"{report['clean_logit_diff']:+.3f} on the sentence" in lines[0]
    assert f"{report['corrupt_logit_diff']:+.3f} on the counterfactual" in lines[0]
    assert not any("NOT A FINDING" in line for line in patch(capsys, " Mary", " John").splitlines())
