"""The floor app behind ``python -m tests.helpers.bench_floor`` (tests/helpers/floor_app), run by AppTest at
each level, so that the bound it measures for the new-prompt target cannot rot: each level draws what its
docstring says and no more, with the app's own sidebar, trace and layer profile; a new prompt changes the
``heatmap`` container's text (what the benchmark waits for); an unknown level is refused."""

from __future__ import annotations

import pytest

from tests.helpers.bench_floor import FLOOR_ROOT, LEVELS

pytestmark = pytest.mark.default_model
MAIN = str(FLOOR_ROOT / "app" / "main.py")


def floor(level: str, monkeypatch, home):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TXVIZ_HOME", str(home))
    monkeypatch.setenv("TXVIZ_FLOOR", level)
    return AppTest.from_file(MAIN, default_timeout=300).run()


def heatmap_text(at) -> str:
    return at.get("markdown")[0].value  # the heatmap container's one line comes before the sidebar's


@pytest.mark.parametrize("level", LEVELS)
def test_each_level_draws_its_part_of_the_page_and_follows_a_new_prompt(level, monkeypatch, default_model_home):
    at = floor(level, monkeypatch, default_model_home)
    assert not at.exception, at.exception
    assert at.sidebar.text_area(key="prompt").value  # the app's own sidebar, with its prompt box
    first = heatmap_text(at)
    assert ("tokens" in first) == (level != "sidebar")  # the trace's line, from the trace level on
    charts = at.get("plotly_chart")
    assert len(charts) == (level == "chart")
    if charts:
        import json

        figure = json.loads(charts[0].proto.spec)
        assert [trace["name"] for trace in figure["data"]] == ["first_token_mass", "prev_token", "duplicate_token",
                                                              "induction", "max_weight"]  # the page's layer profile
        assert len(figure["data"][0]["x"]) == 30  # one point per layer of the default model
    at.sidebar.text_area(key="prompt").set_value("A different prompt for the floor.").run()
    assert not at.exception and heatmap_text(at) != first


def test_an_unknown_level_is_refused(monkeypatch, default_model_home):
    at = floor("everything", monkeypatch, default_model_home)
    assert not at.exception and not at.get("plotly_chart")
    assert [e.value for e in at.error] == ["TXVIZ_FLOOR must be one of ('sidebar', 'trace', 'chart'), not 'everything'"]
