"""A session's first sidebar loads the model before it draws any box a newcomer could type into (the prompt,
the model picker's search box): a box drawn before the load took a sentence whose Enter then waited for
the load, seconds with nothing drawn, and a page that reads idle in the moment between two script runs
offered it. Later runs load what the picker chooses, once."""

from __future__ import annotations

import pytest
import streamlit as st

from app.services import models
from tests.helpers.apptest import no_errors, app_on, pick_model
from txviz.loading.zoo import SHIPPED_ZOO

BASE = str(SHIPPED_ZOO / "base")

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "alibi" / "eval.json").is_file(), reason="the zoo is not trained")


@pytest.fixture
def events(monkeypatch):
    """('load', source) when a model is loaded (not from the cache); 'box' and 'picker' when the prompt box
    and the model picker are drawn."""
    from app import cache

    seen, load, text_area, selectbox = [], models.load_model, st.text_area, st.selectbox
    cache.get_model.clear()
    monkeypatch.setattr(models, "load_model", lambda source: seen.append(("load", source)) or load(source))
    monkeypatch.setattr(st, "text_area", lambda *a, **k: (k.get("key") == "prompt" and seen.append("box"))
                        or text_area(*a, **k))
    monkeypatch.setattr(st, "selectbox", lambda *a, **k: (k.get("key") == "model_choice" and seen.append("picker"))
                        or selectbox(*a, **k))
    yield seen
    cache.get_model.clear()


def test_the_first_run_loads_the_model_before_any_box_and_a_pick_loads_the_new_one_once(events):
    at = app_on(BASE, "once upon a time").run()
    no_errors(at)
    assert events.index(("load", "zoo:base")) < events.index("box")  # by the name the link now gives it < events.index("picker"), events
    assert at.sidebar.text_area(key="prompt").value == "once upon a time"
    events.clear()
    at.sidebar.text_area(key="prompt").input("there was a dog").run()  # typed after the load: no load again
    no_errors(at)
    assert at.sidebar.text_area(key="prompt").value == "there was a dog" and not [e for e in events if e[0] == "load"]
    pick_model(at, "alibi").run()
    no_errors(at)
    loads = [e for e in events if e[0] == "load"]
    assert len(loads) == 1 and loads[0][1].endswith("alibi"), events  # the new model, not the old one again
    assert "alibi" in at.session_state["model"] and at.sidebar.text_area(key="prompt").value == "there was a dog"


def test_a_model_that_fails_to_load_says_so_once_and_still_offers_the_prompt_box(events, tmp_path):
    at = app_on(str(tmp_path / "missing.gguf"), "once upon a time").run()
    assert len([e for e in at.sidebar.error if "Could not load the model" in e.value]) == 1
    assert at.sidebar.text_area(key="prompt").value == "once upon a time"
