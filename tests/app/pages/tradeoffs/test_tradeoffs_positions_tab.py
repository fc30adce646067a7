"""The Tradeoffs page's "Positions beyond training" tab names where the zoo's files are by the project's own
folder, never by the server's absolute path (a visitor's browser should not learn where the app is installed)."""

from __future__ import annotations

from tests.helpers.apptest import no_errors, open_at, texts
from txviz.loading.zoo import SHIPPED_ZOO


def test_the_zoo_folder_is_named_without_the_servers_absolute_path():
    at = open_at("tradeoffs", None, "the cat sat", state={"tradeoffs_tab": "Positions beyond training"})
    no_errors(at)
    shown = texts(at)
    assert "assets/zoo" in shown
    assert str(SHIPPED_ZOO) not in shown and str(SHIPPED_ZOO.parents[1]) not in shown
