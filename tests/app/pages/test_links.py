"""A link reproduces what was on screen: the view is set by hand, the link read from the address, and a
fresh session opened from that link shows the same choices and the same data. The Attention page's
prompt-pair view with its second prompt (on the zoo's tiny model), the Heads page's marks, answer and
completion on its sentence (on the default model); then a change of the input after those choices
drops them from the link."""

from __future__ import annotations

import json

import pytest

from tests.helpers.apptest import MAIN, aim_at, app_on, assert_opened, chart, no_errors

PROMPT = "Mary had a red kite."
SECOND = "Mary had a big kite."  # one word swapped: the same token count on the zoo's byte-level model


def link_of(at) -> dict[str, str]:
    """The address's query parameters, as a link to the page carries them."""
    return {key: at.query_params[key] if isinstance(at.query_params[key], str) else at.query_params[key][-1]
            for key in at.query_params}


def opened(link: dict[str, str], timeout: float = 120):
    """A fresh session (nothing of the last one's state) on the address ``link``."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(MAIN, default_timeout=timeout)
    for key, value in link.items():
        at.query_params[key] = value
    return at


def test_the_attention_link_keeps_the_prompt_pair_view_and_its_second_prompt():
    from txviz.loading.zoo import SHIPPED_ZOO

    at = app_on(str(SHIPPED_ZOO / "base"), PROMPT).run()
    at.session_state["pair_open"] = True  # what a click on the expander does
    at.run()
    at.text_input(key="pair_prompt").input(SECOND).run()
    no_errors(at)
    pair = chart(at, "pair_maps")
    link = link_of(at)
    assert link["pair_open"] == "1" and link["pair_prompt"] == SECOND

    shared = opened(link).run()
    no_errors(shared)
    assert shared.text_input(key="pair_prompt").value == SECOND
    assert json.dumps(chart(shared, "pair_maps"), sort_keys=True) == json.dumps(pair, sort_keys=True)

    shared.text_input(key="pair_prompt").input("").run()  # the reader clears the second prompt: the link follows
    no_errors(shared)
    assert "pair_prompt" not in link_of(shared) and link_of(shared)["pair_open"] == "1"


def strip(at, name: str):
    """The pills strip of the sentence's ``name`` mark (``coref_<name>_<sentence digest>``)."""
    [found] = [w for w in at.get("button_group") if w.key and w.key.startswith(f"coref_{name}_")]
    return found


def keyed(widgets, prefix: str):
    [found] = [w for w in widgets if w.key and w.key.startswith(prefix)]
    return found


def on_screen(at) -> dict:
    """The Coreference tab's choices and what they produce: the marks, the completion, the answer ranked
    for, the ranking and the model's answer."""
    return {"marks": [strip(at, name).value for name in ("pronoun", "candidates", "deciding")],
            "completion": keyed(at.text_input, "coref_completion_").value,
            "answer": keyed(at.radio, "coref_target_").value,
            "ranking": at.dataframe[0].value.to_json(),
            "texts": [m.value for m in at.markdown if "heads**" in m.value or "answer" in m.value.lower()]}


@pytest.mark.default_model
def test_the_heads_link_keeps_the_marks_answer_and_completion(default_model_home, monkeypatch):
    from txviz.analysis.coref.answer import sentence_words
    from app.ui.state import DEFAULT_COREF

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    at = aim_at(opened({}, timeout=300), "heads")
    at.session_state["heads_tab"] = "Coreference"  # what a click on the tab does
    at.run()
    assert_opened(at, "heads")
    words = [w.text for w in sentence_words(DEFAULT_COREF)]
    strip(at, "pronoun").set_value(words.index("him")).run()  # not the suggested "she"
    strip(at, "candidates").set_value([words.index("Mary"), words.index("John"), words.index("station")]).run()
    strip(at, "deciding").set_value(words.index("gave")).run()
    keyed(at.text_input, "coref_completion_").input(" John thanked").run()
    keyed(at.radio, "coref_target_").set_value(2).run()  # rank for "station"
    no_errors(at)
    shown = on_screen(at)
    assert shown["marks"][0] == words.index("him") and shown["answer"] == 2
    link = link_of(at)
    assert {"coref_marks", "coref_answer", "coref_completion"} <= set(link), link

    shared = aim_at(opened(link, timeout=300), "heads").run()  # no tab asked for: the link opens on Coreference
    assert_opened(shared, "heads")
    no_errors(shared)
    assert on_screen(shared) == shown
    assert link_of(shared) == link

    shared.text_input(key="coref_text").input("Anna called Peter because she needed help.").run()
    no_errors(shared)  # another sentence: the marks, answer and completion were the old one's
    assert not {"coref_marks", "coref_answer", "coref_completion"} & set(link_of(shared)), link_of(shared)
    assert [strip(shared, "pronoun").format_func(strip(shared, "pronoun").value)] == ["she"]
