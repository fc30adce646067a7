"""StoppableRun.held: a click that Streamlit raises out of an st.* call mid-run is held, the run sees it
through ``asked`` and returns what it made, and the click is raised again when the block ends."""

from __future__ import annotations

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

from app.ui import state


def test_a_held_click_lets_the_run_end_itself_then_is_raised(monkeypatch):
    monkeypatch.setattr(state.st, "empty", lambda: type("Slot", (), {"button": lambda *a, **k: False, "empty": lambda self: None})())
    made, drawn = [], []

    def draw(n):
        if n == 3:
            raise StopException()  # what Streamlit raises at the first st.* call after a click
        drawn.append(n)

    with pytest.raises(StopException):
        with state.StoppableRun("held_test").held() as hold:
            for n in range(10):
                if hold.asked():
                    break
                made.append(n)
                hold.show(draw, n)
                hold.show(draw, -n)  # nothing more is drawn once a click was held
            assert made == [0, 1, 2, 3]  # the run ended itself at its next step, and kept what it made
    assert drawn == [0, 0, 1, -1, 2, -2]


def test_without_a_click_nothing_is_raised_and_other_errors_pass(monkeypatch):
    monkeypatch.setattr(state.st, "empty", lambda: type("Slot", (), {"button": lambda *a, **k: False, "empty": lambda self: None})())
    with state.StoppableRun("held_test").held() as hold:
        assert hold.show(lambda: 5) == 5 and not hold.asked()
    with pytest.raises(ValueError), state.StoppableRun("held_test").held() as hold:
        hold.show(lambda: (_ for _ in ()).throw(ValueError("a bug, not a click")))
    assert issubclass(RerunException, state.ScriptControlException)  # a rerun click is held too


def test_the_run_started_by_the_click_takes_what_the_stopped_run_kept(monkeypatch):
    """Streamlit stops a run on a click outside a fragment and starts the page again at once; the stopped
    run can no longer write session state, so the new run waits for it and takes what it kept."""
    monkeypatch.setattr(state.st, "empty", lambda: type("Slot", (), {"button": lambda *a, **k: False,
                                                                     "empty": lambda self: None})())
    store: dict = {}
    monkeypatch.setattr(state, "get", lambda key, default=None: store.get(key, default))
    monkeypatch.setattr(state, "put", store.__setitem__)
    monkeypatch.setattr(state, "pop", lambda key, default=None: store.pop(key, default))
    run = state.StoppableRun("held_test")
    assert run.finishing("inputs") is None  # nothing under way
    with pytest.raises(StopException), run.held("inputs") as hold:
        hold.show(lambda: (_ for _ in ()).throw(StopException()))
        hold.keep("the tokens so far")
    assert run.finishing("other inputs") is None and run.finishing("inputs") == "the tokens so far"
    assert run.finishing("inputs") is None  # taken once
    with run.held("inputs") as hold:
        hold.keep("a finished run")  # no click: the run kept it itself, nothing is handed on
    assert run.finishing("inputs") is None
