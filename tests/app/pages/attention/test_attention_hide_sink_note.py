"""Hide sink with nothing before the prompt drops the prompt's first word, not a sink token: the page
says so under the map, only while both are chosen. On the zoo's dense base model."""

from __future__ import annotations

from tests.helpers.apptest import app_on, no_errors
from txviz.loading.zoo import SHIPPED_ZOO

NOTE = "is the prompt's own first word: Hide sink drops its column"


def notes(at) -> list[str]:
    return [c.value for c in at.caption if NOTE in c.value]


def choose(at, policy: str):
    at.sidebar.radio(key="bos").set_value(policy).run()
    no_errors(at)
    return at


def test_the_note_follows_the_policy_and_the_toggle():
    at = app_on(str(SHIPPED_ZOO / "base"), "Mary had a red kite.").run()
    at.toggle(key="hide_sink").set_value(True).run()
    no_errors(at)
    assert at.session_state["bos"] == "sink" and not notes(at)  # a sink token is there to hide
    [note] = notes(choose(at, "none"))
    assert "Mary" in note  # the word that is dropped, by name
    assert not notes(choose(at, "sink"))
    choose(at, "none")
    at.toggle(key="hide_sink").set_value(False).run()
    assert not notes(at)  # nothing hidden, nothing to say
