"""StoppableRun.held: a click that Streamlit raises out of an st.* call mid-run is held, the run sees it
through ``asked`` and returns what it made, and the click is raised again when the block ends."""

from __future__ import annotations

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException

from app.ui import state


def test_a_held_click_lets_the_run_end_itself_then_is_raised(monkeypatch):
    monkeypatch.setattr(state.st, "button", lambda *args, **kwargs: False)
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
    monkeypatch.setattr(state.st, "button", lambda *args, **kwargs: False)
    with state.StoppableRun("held_test").held() as hold:
        assert hold.show(lambda: 5) == 5 and not hold.asked()
    with pytest.raises(ValueError), state.StoppableRun("held_test").held() as hold:
        hold.show(lambda: (_ for _ in ()).throw(ValueError("a bug, not a click")))
    assert issubclass(RerunException, state.ScriptControlException)  # a rerun click is held too
