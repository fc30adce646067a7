"""The Heads page's two long runs (the causal test, the built-in coreference set) through AppTest on the
zoo's tiny base_long model: each has its own Stop, and the page says where a stopped run stopped and what
was kept; the built-in set is scored only on a click, once per model and BOS policy, never by a switch."""

from __future__ import annotations

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import StopException

from app.services.zoo import zoo_path
from tests.helpers.apptest import app_on, no_errors, page_path

SENTENCE = "Mary gave the book to John because she was happy."  # words of the tiny model's stories


@pytest.fixture(autouse=True)
def fresh_stores():
    from app import cache

    cache._shared.clear()
    yield
    cache._shared.clear()


def heads_page():
    at = app_on(model=str(zoo_path("base_long")))
    at.query_params["coref_text"] = SENTENCE  # a link with a sentence opens on the Coreference tab
    at.run()
    at.switch_page(page_path("heads")).run()
    no_errors(at)
    return at


def stopped_after(message: str):
    """A run that reports ``message`` at a quarter of its work, then meets a Stop (Streamlit raises it
    out of the next st.* call, here the progress bar's)."""
    def run(*args):
        progress = args[-1]
        progress(0.25, message)
        raise StopException()

    return run


def infos(at) -> str:
    return " ".join(i.value for i in at.info)


def test_a_stopped_causal_test_says_where_it_stopped_and_that_nothing_was_kept(monkeypatch):
    from app import cache

    at = heads_page()
    monkeypatch.setattr(cache, "get_causal_report", stopped_after("step 2 of 6 (patching every head), batch 3 of 9"))
    at.button(key="causal_run").click().run()
    assert "Stop" in [b.label for b in at.button if b.key == "causal_stop"]  # its own Stop, beside the bar
    monkeypatch.undo()
    at.run()  # the next run of the page, after the stop
    no_errors(at)
    said = infos(at)
    assert "Stopped after" in said and "step 2 of 6 (patching every head), batch 3 of 9 (25% of the work)" in said
    assert "Nothing of it was kept" in said and [b for b in at.button if b.key == "causal_run"]
    assert not at.get("progress")  # no frozen bar
    at.run()
    assert "Stopped after" not in infos(at)  # said once
    at.button(key="causal_run").click().run()  # a finished run leaves nothing to report
    no_errors(at)
    assert any(m.label.startswith("Logit difference") for m in at.metric) and "Stopped after" not in infos(at)


def fake_scores(loaded, bos, progress=None):
    """The built-in set's result for a 4 × 4 model (its real sentences are outside the tiny vocabulary)."""
    for done in (1, 2):
        progress(done / 2, f"batch {done} of 2")
    heads = [{"layer": layer, "head": head, "accuracy": 0.5, "margin": 0.0} for layer in range(4) for head in range(4)]
    return {"n_cases": 240, "baselines": {"nearest": 0.5, "first": 0.5}, "heads": heads, "bos": bos}


def test_the_builtin_set_is_scored_on_a_click_once_per_model_and_policy(monkeypatch):
    from app.services import heads

    scored = []
    monkeypatch.setattr(heads, "check_coref", lambda *a, **k: None)
    monkeypatch.setattr(heads, "coref_evaluation", lambda loaded, bos, progress=None: scored.append(bos)
                        or fake_scores(loaded, bos, progress))
    at = heads_page()
    assert not scored and "Best head" not in [m.label for m in at.metric]
    assert any("here now" in c.value for c in at.caption)  # the estimate, before the click
    at.button(key="coref_builtin").click().run()
    no_errors(at)
    assert scored == ["sink"] and "Best head" in [m.label for m in at.metric]
    at.radio(key="bos").set_value("none").run()  # another policy: nothing runs until it is asked for
    no_errors(at)
    assert scored == ["sink"] and "Best head" not in [m.label for m in at.metric]
    assert [b for b in at.button if b.key == "coref_builtin"]
    at.radio(key="bos").set_value("sink").run()  # back: the kept result, without a new run
    assert scored == ["sink"] and "Best head" in [m.label for m in at.metric]
    other = heads_page()  # another session: the same kept result, at no cost
    assert scored == ["sink"] and "Best head" in [m.label for m in other.metric]


def test_a_stopped_builtin_set_says_so_and_keeps_nothing(monkeypatch):
    from app.services import heads

    monkeypatch.setattr(heads, "check_coref", lambda *a, **k: None)
    monkeypatch.setattr(heads, "coref_evaluation", stopped_after("batch 4 of 16"))
    at = heads_page()
    at.button(key="coref_builtin").click().run()
    at.run()
    no_errors(at)
    said = infos(at)
    assert "Stopped after" in said and "batch 4 of 16 (25% of the sentences)" in said
    assert "Best head" not in [m.label for m in at.metric] and [b for b in at.button if b.key == "coref_builtin"]


def test_no_stop_button_is_left_once_the_builtin_set_is_scored(monkeypatch):
    from app.services import heads

    monkeypatch.setattr(heads, "check_coref", lambda *a, **k: None)
    monkeypatch.setattr(heads, "coref_evaluation", fake_scores)
    at = heads_page()
    at.button(key="coref_builtin").click().run()
    no_errors(at)
    assert "Best head" in [m.label for m in at.metric]  # the run finished in this script run
    assert not [b for b in at.button if b.key == "coref_set_stop"]  # and took its Stop with it
