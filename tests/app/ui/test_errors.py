"""An unexpected error on a page: the visitor sees one line with an id and none of the server's paths; the
traceback goes to the server's log under that id. A refused model path names no allowed directory."""

from __future__ import annotations

import logging
import re

import pytest


def _failing_page():
    from app.ui import errors

    errors.guarded(lambda: open("/srv/secret/txviz/weights.bin"))


def test_an_unexpected_error_shows_one_line_and_an_id_and_logs_the_traceback(caplog, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from app.ui import errors

    monkeypatch.setattr(errors, "under_apptest", lambda: False)  # as on a real server: reported, not raised
    with caplog.at_level(logging.ERROR, logger="txviz.app"):
        at = AppTest.from_function(_failing_page, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    [shown] = [e.value for e in at.error]
    error_id = re.search(r"id ([0-9a-f]{8})", shown).group(1)
    assert "\n" not in shown and "/srv" not in shown and "Traceback" not in shown
    [record] = [r for r in caplog.records if error_id in r.getMessage()]
    assert record.exc_info and "/srv/secret/txviz/weights.bin" in str(record.exc_info[1])


def test_the_guard_lets_an_exception_through_under_apptest():
    from streamlit.testing.v1 import AppTest

    def page():
        from app.ui import errors

        errors.guarded(lambda: 1 / 0)

    at = AppTest.from_function(page, default_timeout=60).run()
    assert at.exception and not at.error  # a test that checks a page for exceptions still sees this one


def test_a_refused_model_path_names_no_allowed_directory(tmp_path, monkeypatch, caplog):
    from txviz.loading.errors import ModelLoadError
    from txviz.loading.sources import confine

    secret = tmp_path / "operator-only-models"
    secret.mkdir()
    monkeypatch.setenv("TXVIZ_MODEL_DIRS", str(secret))
    with caplog.at_level(logging.WARNING), pytest.raises(ModelLoadError) as refused:
        confine("/etc/passwd")
    assert "outside the allowed model directories" in str(refused.value)
    assert str(secret) not in str(refused.value) and str(tmp_path) not in str(refused.value)
    assert str(secret) in caplog.text  # the operator finds the list in the server's log
