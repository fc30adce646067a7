"""A word is scored as it would follow a space, in the app and in ``txviz patch`` alike: "she" typed
without its space is read as " she", not as the tokens of "she" at the start of a text."""

from __future__ import annotations

import pytest

from tests.helpers.byte_tokenizer import ByteLevelTokenizer
from txviz.analysis.coref.answer import as_next_word, first_tokens
from txviz.causal.metric import answer_tokens, word_tokens


@pytest.fixture(scope="module")
def tokenizer():
    return ByteLevelTokenizer()  # " she" is one token "Ġshe"; "she" alone is "s", "h", "e"


def test_a_word_typed_without_its_space_scores_the_token_after_a_space(tokenizer):
    typed, spaced = answer_tokens(tokenizer, "she", "Mary"), answer_tokens(tokenizer, " she", " Mary")
    assert typed == spaced
    assert typed.answer_id == tokenizer.encode(" she").ids[0] != tokenizer.encode("she").ids[0]
    assert typed.answer_token == "Ġshe" and typed.answer_pieces == ("Ġshe",)
    assert typed.wrong_pieces == tuple(tokenizer.encode(" Mary").tokens)  # the word's tokens, its first scored


def test_the_causal_words_and_the_coreference_candidates_follow_one_rule(tokenizer):
    words = ["she", " Mary ", "John"]
    ids, _ = first_tokens(tokenizer, words)
    for word, token_id in zip(words, ids):
        assert as_next_word(word) == " " + word.strip()
        assert word_tokens(tokenizer, word, "answer")[0] == token_id


def test_surrounding_spaces_do_not_change_the_token(tokenizer):
    assert answer_tokens(tokenizer, "  she ", "Mary") == answer_tokens(tokenizer, "she", "Mary")
