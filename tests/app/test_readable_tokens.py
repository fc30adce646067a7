"""Every page labels its charts with the tokens as a person reads them: a character that the default
model's byte-level BPE splits over two tokens (an emoji) shows whole, not as ``\\xf0\\x9f`` halves; the
trace keeps its own tokens."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import app_on, chart, no_errors, page_path

pytestmark = pytest.mark.default_model

EMOJI_PROMPT = "I 😀 you 🦜 and the cat"


@pytest.fixture
def emoji_app(default_model_home, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    return app_on(prompt=EMOJI_PROMPT, timeout=300)


def readable(labels) -> bool:
    labels = [str(label) for label in labels]
    return any(label.endswith("😀") for label in labels) and not any("\\x" in label for label in labels)


def test_the_block_page_labels_split_characters_whole(emoji_app):
    at = emoji_app.run()
    at.switch_page(page_path("block")).run()
    no_errors(at)
    assert readable(chart(at, "resid_norms")["data"][0]["y"]), chart(at, "resid_norms")["data"][0]["y"]
    position = at.select_slider(key="lens_position")
    assert readable(position.options)


def test_the_heads_page_labels_split_characters_whole(emoji_app):
    at = emoji_app.run()
    at.switch_page(page_path("heads")).run()
    at.session_state["heads_tab"] = "Coreference"  # what a click on the tab does
    at.run()
    at.text_input(key="coref_text").input("Mary 😀 thanked Anna because she was kind.").run()
    no_errors(at)
    maps = [c for c in at.get("plotly_chart") if c.proto.id and "coref_map_" in c.proto.id]
    assert maps, "no ranked head maps"
    assert readable(chart(at, "coref_map_")["data"][0]["x"])


def test_the_positions_page_labels_split_characters_whole(emoji_app):
    at = emoji_app.run()
    at.switch_page(page_path("positions")).run()
    no_errors(at)
    assert readable(at.selectbox(key="rope_token").options)
