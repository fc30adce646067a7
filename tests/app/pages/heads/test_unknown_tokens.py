"""A word-level vocabulary's unknown token repeats without being a repeated word: the duplicate-token
and induction patterns leave it out (as plain functions, on the zoo's tokenizer, and on the Heads page)."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.apptest import has_chart, no_errors, open_at, texts
from txviz.analysis.heads.detectors import unknown_token_ids
from txviz.analysis.heads.metrics import duplicate_pattern, head_metrics, ignored_positions, induction_pattern
from txviz.loading.zoo import SHIPPED_ZOO

UNK = 1


def attend_to_last_copy(ids: torch.Tensor) -> torch.Tensor:
    """(1, 1, T, T): each row puts all its weight on the last earlier copy of its token, else on itself."""
    t = len(ids)
    probs = torch.zeros(1, 1, t, t)
    for i in range(t):
        earlier = [j for j in range(i) if ids[j] == ids[i]]
        probs[0, 0, i, earlier[-1] if earlier else i] = 1.0
    return probs


def test_a_repeated_unknown_is_no_duplicate_and_no_induction_target():
    ids = torch.tensor([5, UNK, 7, UNK, 9, UNK])
    assert duplicate_pattern(ids).any() and not duplicate_pattern(ids, (UNK,)).any()
    assert induction_pattern(ids)[3].any() and not induction_pattern(ids, (UNK,)).any()
    assert ignored_positions(ids, (UNK,)).tolist() == [False, True, False, True, False, True]
    assert not ignored_positions(ids).any()


def test_unknowns_no_longer_inflate_the_duplicate_score_and_real_repeats_still_count():
    ids = torch.tensor([5, UNK, 7, UNK, 5, UNK, 8, 9])  # "5" repeats once; UNK three times
    probs = attend_to_last_copy(ids)
    inflated = head_metrics(probs, ids)["duplicate_token"].item()
    honest = head_metrics(probs, ids, (UNK,))["duplicate_token"].item()
    assert inflated == pytest.approx(1.0) and honest == pytest.approx(1.0)  # the copy head scores on the real repeat
    spread = probs.clone()
    spread[0, 0, 3], spread[0, 0, 5] = 0.0, 0.0  # the UNK rows look elsewhere: only unknowns were "missed"
    spread[0, 0, 3, 3], spread[0, 0, 5, 5] = 1.0, 1.0
    assert head_metrics(spread, ids)["duplicate_token"].item() == pytest.approx(1 / 3)  # penalised for unknowns
    assert head_metrics(spread, ids, (UNK,))["duplicate_token"].item() == pytest.approx(1.0)


def test_only_unknowns_repeating_leaves_duplicate_and_induction_undefined():
    ids = torch.tensor([5, UNK, 6, UNK, 7, UNK])
    metrics = head_metrics(attend_to_last_copy(ids), ids, (UNK,))
    assert torch.isnan(metrics["duplicate_token"]).all() and torch.isnan(metrics["induction"]).all()
    assert head_metrics(attend_to_last_copy(ids), ids)["duplicate_token"].item() == pytest.approx(1.0)  # before


zoo = pytest.mark.skipif(not (SHIPPED_ZOO / "base" / "eval.json").is_file(), reason="the zoo is not trained")


@zoo
def test_the_zoo_tokenizer_names_its_unknown_token_and_a_byte_level_one_has_none(default_model):
    from txviz.loading import load

    tokenizer = load(str(SHIPPED_ZOO / "base")).tokenizer
    (unknown,) = unknown_token_ids(tokenizer)
    assert tokenizer.backend.id_to_token(unknown) == "<|unk|>"
    assert unknown_token_ids(default_model.tokenizer) == ()


@zoo
def test_the_heads_page_says_unknowns_were_left_out_and_scores_without_them():
    prompt = "Zorblax quibbled and Zorblax fizzed"  # made-up words, all <|unk|>: only the unknown repeats
    at = open_at("heads", str(SHIPPED_ZOO / "base"), prompt)
    no_errors(at)
    said = texts(at)
    assert "tokens are the unknown token “<|unk|>”: they are left out of duplicate-token and induction" in said
    assert "no token repeats in this prompt (unknown tokens aside)" in said
    assert not has_chart(at, "det_dup")  # before: a duplicate-token grid scored on the unknowns alone
