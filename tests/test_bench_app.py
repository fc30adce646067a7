"""``python -m tests.bench_app`` once, with one sample each, so that the app benchmark cannot rot: every
figure measured, every target reported met or missed (on a loaded CI machine either is possible)."""

from __future__ import annotations

import json

import pytest

from tests.browser import browser_available

pytestmark = [pytest.mark.browser, pytest.mark.default_model]


def test_app_benchmark_measures_every_figure(default_model_home, monkeypatch, capsys):
    reason = browser_available()
    if reason:
        pytest.skip(reason)
    from tests import bench_app

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    assert bench_app.main(["--json", "--repeats", "1"]) == 0
    result = json.loads(capsys.readouterr().out)
    server, browser = result["server"], result["browser"]
    assert server["head_switch_ms"] > 0 and server["layer_switch_ms"] > 0 and server["prompt_64_s"] > 0
    assert len(server["samples"]["head_switch_s"]) == 2 and len(server["samples"]["prompt_64_s"]) == 1
    assert browser["start_to_first_figure_s"] > 0 and browser["prompt_64_s"] > 0 and browser["figures"] >= 3
    assert set(result["targets"]) == set(bench_app.TARGETS)
    for target in result["targets"].values():
        assert target["met"] == (target["measured"] <= target["target"])


def test_prompts_have_exactly_the_asked_tokens(default_model_home, monkeypatch):
    from tests.bench_app import prompts_of
    from txviz.loading import load

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    prompts = prompts_of(64, 3)
    assert len(set(prompts)) == 3
    tokenizer = load().tokenizer
    assert [len(tokenizer.encode(p, bos="sink").ids) for p in prompts] == [64, 64, 64]
