"""The deciding word suggested for a sentence is the last word of the pronoun's own sentence when it is
one of a known Winograd contrast (big ⇄ small), never any other word: "Mary met John and she smiled." (the
README's example) is settled by gender before the pronoun, and "smiled" decides nothing. So a link
that carries the sentence with its completion ("… too big. The thing that was too big was the") proposes
big ⇄ small, not a swap of the candidates (whose prompts part at the second token: about twice the
causal run's work)."""

from __future__ import annotations

import pytest

from app.services.causal import propose_counterfactual
from txviz.analysis.coref.answer import sentence_words, suggest_deciding_word, suggest_pronoun

TROPHY = "The trophy didn't fit in the suitcase because it was too big."


def deciding(text: str) -> str | None:
    words = sentence_words(text)
    i = suggest_deciding_word(words, suggest_pronoun(words), text)
    return None if i is None else words[i].text


@pytest.mark.parametrize("text, word", [
    (TROPHY, "big"),
    (TROPHY + " The thing that was too big was the", "big"),  # the link with its completion
    (TROPHY + " It was a gift.", "big"),
    ("The car didn't fit in the box because it was 0.5 m too big. It was new.", "big"),  # a point in a number
    ("The trophy didn't fit in the suitcase because it was too big", "big"),  # no final stop
    ("Mary met John at the station, and she gave him a book.", None),  # a noun ends it
    ("Mary met John. She smiled.", None),  # a last word with no known contrast is not guessed
    ("Mary met John and she smiled.", None),  # the README's example: gender decides, before "she"
    ("Zoë told Ana that she 👩‍🔬 won.", None),
    ("The trophy didn't fit in the suitcase because it was too small.", "small"),  # the other of the pair
    ("The box was too big for it.", None),  # the contrast comes before the pronoun
    ("The cup is here.", None),  # no pronoun
])
def test_the_last_word_of_the_pronouns_sentence(text, word):
    assert deciding(text) == word


def test_the_link_with_its_completion_proposes_big_for_small():
    text = TROPHY + " The thing that was too big was the"
    corrupt, how = propose_counterfactual(text, deciding(text), ("trophy", "suitcase"))
    assert corrupt == text.replace("big", "small") and "replaced" in how
