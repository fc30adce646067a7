"""The Heads page's Coreference tab on the zoo's tiny base_long (word-level vocabulary, fast): the
sidebar's prompt offered as the sentence when it has a pronoun to mark, and the margin grid drawn on a
diverging scale centred on zero (a margin is signed)."""

from __future__ import annotations

import numpy as np

from app.services.zoo import zoo_path
from app.ui.widgets import plain
from tests.helpers.apptest import chart, decode, no_errors, open_at

SENTENCE = "Mary gave the book to John because she was happy."  # words of the tiny model's stories
TYPED = "John saw Mary at school and he gave her a book."


def coref_tab(prompt: str):
    at = open_at("heads", model=str(zoo_path("base_long")), prompt=prompt, state={"heads_tab": "Coreference"})
    no_errors(at)
    return at


def offer(at):
    return [b for b in at.button if b.key == "coref_use_prompt"]


def test_the_sidebars_prompt_is_offered_as_the_sentence_and_follows_the_prompt():
    at = coref_tab(TYPED)
    assert at.text_input(key="coref_text").value != TYPED
    [button] = offer(at)
    assert any(plain(TYPED) in c.value for c in at.caption)
    button.click().run()
    no_errors(at)
    assert at.text_input(key="coref_text").value == TYPED
    assert any("heads**" in m.value and "from *he*" in m.value for m in at.markdown)  # ranked for its pronoun
    assert not offer(at)  # the sentence is the prompt already
    at.sidebar.text_area(key="prompt").input("John saw Mary at school today.").run()  # no pronoun
    no_errors(at)
    assert not offer(at) and at.text_input(key="coref_text").value == TYPED
    at.sidebar.text_area(key="prompt").input(SENTENCE).run()
    no_errors(at)
    assert offer(at) and any(plain(SENTENCE) in c.value for c in at.caption)


def test_a_prompt_without_two_words_before_a_pronoun_is_not_offered():
    assert not offer(coref_tab("Mary, she gave the book to John."))  # one word before the pronoun


def test_the_margin_grid_is_diverging_and_centred_on_zero():
    at = coref_tab(SENTENCE)
    trace = chart(at, "coref_grid")["data"][0]
    margins = decode(trace["z"]).astype(float)
    assert (margins < 0).any() and (margins > 0).any()  # signed: some heads favour another candidate
    assert trace["zmid"] == 0 and trace["zmin"] == -trace["zmax"] and trace["zmax"] >= np.abs(margins).max()
    colours = [colour for _, colour in trace["colorscale"]]
    middle = colours[len(colours) // 2]
    assert middle.replace(" ", "") in ("rgb(247,247,247)", "#f7f7f7")  # white at zero, whatever the sign
