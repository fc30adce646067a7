"""The Coreference tab's logic without Streamlit (txviz.analysis.coref.marks, coref_table): choices checked,
widget names tied to their sentence, stale marks found, the ranking as rows and a grid."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from txviz.analysis.coref.ranking import score_heads
from txviz.analysis.coref.answer import QUERY_KINDS, sentence_words, suggest_candidates, suggest_deciding_word, \
    suggest_pronoun
from txviz.analysis.coref.marks import MARK_NAMES, Marks, check_before_pronoun, check_choice, digest, mark_key, \
    same_prefix, sort_keys
from txviz.analysis.coref.table import count_predicting, head_grid, ranking_rows

TROPHY = "The trophy didn't fit in the suitcase because it was too big."
MARY = "Mary met John at the station, and she gave him a book."


# ---- names tied to their inputs --------------------------------------------------------------------

def test_mark_key_follows_the_sentence_and_the_other_inputs():
    assert mark_key("pronoun", TROPHY) == mark_key("pronoun", TROPHY)
    assert mark_key("pronoun", TROPHY) != mark_key("pronoun", MARY)
    assert mark_key("pronoun", TROPHY).startswith("coref_pronoun_")
    assert mark_key("target", TROPHY, ["trophy", "suitcase"]) != mark_key("target", TROPHY, ["trophy", "fit"])
    assert mark_key("target", TROPHY, ["a"]).split("_")[2] == digest(TROPHY)  # the sentence's part comes first


def test_mark_key_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="mark name"):
        mark_key("pronouns", TROPHY)


def test_sort_keys_keeps_this_sentence_and_forgets_the_others():
    mine = [mark_key(name, TROPHY) for name in MARK_NAMES] + [mark_key("swap", TROPHY, 11)]
    theirs = [mark_key("pronoun", MARY), mark_key("query", MARY, True)]
    other = ["coref_text", "layer", "ind_len", "pattern_kind", 7]
    keep, forget = sort_keys(mine + theirs + other, TROPHY, kept_prefixes=("ind_len", "pattern_"))
    assert keep == mine + ["ind_len", "pattern_kind"]
    assert forget == theirs
    assert sort_keys(theirs, MARY) == (theirs, [])


# ---- the reader's choice ---------------------------------------------------------------------------

def test_check_choice_says_what_is_missing():
    with pytest.raises(ValueError, match="Click the pronoun"):
        check_choice(None, [0, 1])
    with pytest.raises(ValueError, match="at least two candidate"):
        check_choice(8, [1])
    with pytest.raises(ValueError, match="other than the pronoun"):
        check_choice(8, [1, 8])
    assert check_choice(8, [6, 1]) == [1, 6]


CATAPHORA = "When she finally arrived, Mary thanked John for waiting."


@pytest.mark.parametrize("text, pronoun, candidates, said", [
    (CATAPHORA, "she", ["Mary", "John"], "“Mary” and “John” come after “she”."),
    ("Mary said that she saw John.", "she", ["Mary", "John"], "“John” comes after “she” and only “Mary” before it."),
    (MARY + " Later John smiled.", "she", ["Mary", "station", "John"], "“John” comes after “she”."),
])
def test_candidates_after_the_pronoun_are_refused_by_name(text, pronoun, candidates, said):
    """Refused because a causal model's row at the pronoun gives a later word attention 0 in every head."""
    words = [w.text for w in sentence_words(text)]
    marked = [len(words) - 1 - words[::-1].index(c) if c == "John" else words.index(c) for c in candidates]
    with pytest.raises(ValueError, match="cannot see a later word") as refused:
        check_before_pronoun(sentence_words(text), words.index(pronoun), marked)
    assert str(refused.value).startswith(said)


def test_candidates_before_the_pronoun_pass():
    words = sentence_words(MARY)
    assert check_before_pronoun(words, 8, [0, 2]) is None


@pytest.mark.parametrize("text, pronoun, candidates", [(TROPHY, "it", ["trophy", "suitcase"]),
                                                       (MARY, "she", ["Mary", "John"])])
def test_the_suggestions_make_a_valid_choice(text, pronoun, candidates):
    words = sentence_words(text)
    guess = suggest_pronoun(words)
    chosen = check_choice(guess, suggest_candidates(words, guess))
    assert words[guess].text == pronoun and [words[i].text for i in chosen] == candidates


def test_marks_know_whether_the_deciding_word_follows_the_pronoun():
    words = sentence_words(TROPHY)
    pronoun = suggest_pronoun(words)
    deciding = suggest_deciding_word(words, pronoun)
    after = Marks(pronoun, (1, 6), deciding, " The thing that was too big was the")
    assert words[deciding].text == "big" and after.decided_after_pronoun
    assert after.query_kinds() == list(QUERY_KINDS)
    before = Marks(pronoun, (1, 6), 3, "")
    assert not before.decided_after_pronoun and "deciding word" in before.query_kinds()
    unmarked = Marks(pronoun, (1, 6), None, "")
    assert not unmarked.decided_after_pronoun and unmarked.query_kinds() == ["pronoun", "completion end"]


def test_same_prefix_compares_up_to_and_including_the_row():
    assert same_prefix((1, 2, 3, 4), [1, 2, 3, 9], 2)
    assert not same_prefix((1, 2, 3, 4), (1, 2, 5, 4), 2)
    assert not same_prefix((1, 2), (1, 2, 3), 2)


# ---- the ranking as rows and a grid ----------------------------------------------------------------

def test_ranking_rows_and_grid_follow_the_scores():
    probs = torch.zeros(2, 2, 4, 4)  # (L, H, T, T); row 3 reads candidates at tokens 0 and 1
    probs[0, 0, 3, :2] = torch.tensor([0.7, 0.1])
    probs[0, 1, 3, :2] = torch.tensor([0.2, 0.6])
    probs[1, 0, 3, :2] = torch.tensor([0.3, 0.3])  # a tie
    probs[1, 1, 3, :2] = torch.tensor([0.5, 0.4])
    scores = score_heads(probs, 3, [[0], [1]], target=0)
    rows = ranking_rows(scores, ["Mary", "John"])
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (1, 1), (1, 0), (0, 1)]
    assert [r["predicts"] for r in rows] == ["Mary", "Mary", "tie", "John"]
    assert rows[0]["→ Mary"] == pytest.approx(0.7) and rows[0]["→ John"] == pytest.approx(0.1)
    assert count_predicting(rows, "Mary") == 2 and count_predicting(rows, "John") == 1
    grid = head_grid(((s.layer, s.head, s.margin) for s in scores), 2, 2)
    np.testing.assert_allclose(grid, [[0.6, -0.4], [0.0, 0.1]], atol=1e-6)


def test_marks_round_trip_through_their_link_text():
    from txviz.analysis.coref.marks import marks_text, read_marks

    for marks in ((8, [0, 3], 11), (8, [0, 3], None), (None, [], None), (2, [0, 1], 0)):
        assert read_marks(marks_text(*marks), 12) == marks
    assert marks_text(8, [3, 0], None) == "8:0,3:"  # candidates in sentence order


@pytest.mark.parametrize("text", ["", "x:0,1:", "8:0,1", "8:0,1::", "12:0,1:", "8:0,12:", "8:0,0:", "-1:0,1:",
                                  "8:0,a:", "8:0,,1:", "1e3:0,1:", ":::"])
def test_marks_from_a_hand_edited_or_other_sentences_link_are_refused(text):
    from txviz.analysis.coref.marks import read_marks

    assert read_marks(text, 12) is None
