"""Whether a counterfactual flips the answer (txviz.causal.flip), and correlations shown with the digits
they need (txviz.causal.attribution.correlation_text)."""

from __future__ import annotations

import pytest

from txviz.causal.attribution import correlation_text
from txviz.causal.flip import answer_flip, no_flip_message


@pytest.mark.parametrize("clean, corrupt, flips, prefers", [
    (2.3, -0.5, True, ("answer", "wrong")),
    (-0.83, -0.41, False, ("wrong", "wrong")),  # SmolLM2 on the trophy pair: "suitcase" on both
    (1.2, 0.7, False, ("answer", "answer")),  # Gemma on the trophy pair: "trophy" on both
    (-1.0, 2.0, False, ("wrong", "answer")),  # wrong on the sentence, right on the counterfactual
    (0.0, -1.0, False, ("neither", "wrong")),
])
def test_answer_flip(clean, corrupt, flips, prefers):
    flip = answer_flip(clean, corrupt)
    assert flip["flips"] is flips and (flip["clean_prefers"], flip["corrupt_prefers"]) == prefers
    assert (flip["clean_logit_diff"], flip["corrupt_logit_diff"]) == (clean, corrupt)
    message = no_flip_message(flip, "trophy", "suitcase")
    assert (message is None) is flips
    if message:
        assert f"{clean:+.3f} on the sentence" in message and f"{corrupt:+.3f} on the counterfactual" in message


def test_the_message_names_the_word_preferred_on_both():
    assert "prefers suitcase on both" in no_flip_message(answer_flip(-0.83, -0.41), "trophy", "suitcase")
    assert "prefers trophy on both" in no_flip_message(answer_flip(1.2, 0.7), "trophy", "suitcase")
    assert "gets the sentence wrong" in no_flip_message(answer_flip(-1.0, 2.0), "trophy", "suitcase")


@pytest.mark.parametrize("value, text", [
    (0.996, "+0.996"), (0.9996, "+0.9996"), (-0.996, "-0.996"), (0.42, "+0.42"), (0.004, "+0.004"),
    (1.0, "+1.00"), (-1.0, "-1.00"), (0.0, "+0.00"),
    (1 - 2**-52, "+1.00"),  # identical rankings: Pearson of the ranks lands a float step from 1
    (1 - 1e-9, "+0.999999"),  # below 1 by less than shown digits can say: cut down, never rounded up to 1
    (3e-9, "+3e-09"), (None, "undefined"),
])
def test_a_correlation_never_reads_as_a_value_it_does_not_have(value, text):
    assert correlation_text(value) == text
    if value is not None and value not in (0.0, 1.0, -1.0) and abs(abs(value) - 1) > 1e-12:
        assert abs(float(text)) not in (0.0, 1.0)
