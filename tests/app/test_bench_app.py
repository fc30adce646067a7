"""``python -m tests.helpers.bench_app`` once, with one sample each, so that the app benchmark cannot rot.

Besides the report itself, the test watches the benchmark work: every AppTest run it timed (the page
script really ran, with the head, layer or prompt it claims to have set, and drew its figures), and the
``streamlit run`` server it timed in the browser (it answered as the txviz app, and the browser page was
that server's, with the figures the report counts). The report's figures must be positive, the medians
of their own samples, and ordered as the work behind them is: a new prompt runs the model, a head switch
redraws a cached trace. Whether a target is met is reported, not asserted (a loaded CI machine may miss it).
"""

from __future__ import annotations

import json
import re
import statistics
import urllib.request
from contextlib import contextmanager

import pytest

from tests.helpers.browser import browser_available

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

REPEATS = 1
OPENED = ["attention", "kv-cache"]  # the page of every other part, and one more: every page opens in the browser tests
OPENED_COLD = ["attention"]  # a new tab takes 4-9 s: one proves the code, the figures drawn are the page's


class _RecordingBrowser:
    """A playwright browser whose pages are kept, so the test can look at them after the benchmark."""

    def __init__(self, browser, pages: list):
        self._browser, self._pages = browser, pages

    def new_page(self, *args, **kwargs):
        page = self._browser.new_page(*args, **kwargs)
        self._pages.append(page)
        return page

    def __getattr__(self, name):
        return getattr(self._browser, name)


@pytest.fixture
def watched(monkeypatch, request):
    """Spies on the benchmark's page runs, its server and its browser pages; returns what they saw. The
    benchmark's chromium is the worker's own (the session's ``browser`` fixture): playwright's sync API
    refuses a second instance in a process that already runs one."""
    from tests.helpers import bench_app, browser

    # started before chromium_browser is patched below: the session fixture must get the real one
    shared_chromium = request.getfixturevalue("browser")
    seen = {"runs": [], "servers": [], "pages": [], "at_exit": []}
    real_check, real_server = bench_app._check, browser.streamlit_server

    def check(at):
        real_check(at)
        seen["runs"].append({"charts": [c.proto.id for c in [*at.get("plotly_chart"), *at.get("bidi_component")]],
                             "head": at.number_input(key="head").value, "layer": at.slider(key="layer").value,
                             "prompt": at.sidebar.text_area(key="prompt").value})

    @contextmanager
    def server(*args, **kwargs):
        with real_server(*args, **kwargs) as url:
            with urllib.request.urlopen(url, timeout=30) as response:
                seen["servers"].append({"url": str(url), "status": response.status, "html": response.read().decode()})
            yield url
            seen["at_exit"] = [{"url": p.url, "title": p.title(), "charts": p.locator(bench_app.FIGURE).count(),
                                "heatmap": p.locator(".st-key-heatmap").inner_text()} for p in seen["pages"]]

    @contextmanager
    def chromium():
        pages = len(seen["pages"])
        try:
            yield _RecordingBrowser(shared_chromium, seen["pages"])
        finally:
            for page in seen["pages"][pages:]:
                page.close()  # the shared chromium stays; the benchmark's pages (and their contexts) go

    monkeypatch.setattr(bench_app, "_check", check)
    monkeypatch.setattr(browser, "streamlit_server", server)
    monkeypatch.setattr(browser, "chromium_browser", chromium)
    return seen


def test_app_benchmark_measures_the_app_it_reports(default_model_home, default_model, monkeypatch, capsys,
                                                   watched):
    reason = browser_available()
    if reason:
        pytest.skip(reason)
    from tests.helpers import bench_app

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    assert bench_app.main(["--json", "--repeats", str(REPEATS), "--pages", *OPENED, "--cold-pages", *OPENED_COLD]) == 0
    result = json.loads(capsys.readouterr().out)
    server, browser = result["server"], result["browser"]
    config = default_model.config  # the session's own load of the default model: the benchmark loads its own

    # the server side: one AppTest run per sample, each the interaction it claims, each with its figures
    runs = watched["runs"]
    samples = server["samples"]
    assert len(runs) == 1 + len(samples["head_switch_s"]) + len(samples["layer_switch_s"]) + len(samples["prompt_64_s"])
    heads, layers = runs[1:1 + 2 * REPEATS], runs[1 + 2 * REPEATS:1 + 4 * REPEATS]
    assert [r["head"] for r in heads] == bench_app._cycle(config.n_heads, 2 * REPEATS)
    assert [r["layer"] for r in layers] == bench_app._cycle(config.n_layers, 2 * REPEATS)
    prompts = [r["prompt"] for r in runs[1 + 4 * REPEATS:]]
    assert len(set(prompts + [runs[0]["prompt"]])) == REPEATS + 1  # each timed prompt was new to the cache
    assert all(any("heatmap" in (c or "") for c in r["charts"]) for r in runs)  # the head maps component

    # the figures reported are the medians of their own positive samples, ordered as their work is
    for name, values in samples.items():
        assert values and all(v > 0 for v in values), name
    assert server["head_switch_ms"] == round(statistics.median(samples["head_switch_s"]) * 1000, 1)
    assert server["layer_switch_ms"] == round(statistics.median(samples["layer_switch_s"]) * 1000, 1)
    assert server["prompt_64_s"] == round(statistics.median(samples["prompt_64_s"]), 3)
    assert server["prompt_64_s"] > server["head_switch_ms"] / 1000  # a new prompt runs the model; a switch does not
    assert server["first_run_s"] > server["head_switch_ms"] / 1000  # the first run loads the model

    # the browser side: the server answered as the txviz app, and the page timed was that server's
    [served] = watched["servers"]
    assert served["status"] == 200 and "<title>" in served["html"]
    [page] = watched["at_exit"]
    assert page["url"].startswith(served["url"]) and page["title"].startswith("txviz")
    assert page["charts"] >= browser["figures"] >= 3
    # the last switches timed are the ones drawn: the page's layer (slider, last) and head (Head box)
    last_head = bench_app._cycle(config.n_heads, 2 * REPEATS)[-1]
    assert re.search(rf"Layer {2 * REPEATS}, head {last_head}([^0-9]|$)", page["heatmap"])
    browser_samples = browser["samples"]
    assert len(browser_samples["prompt_64_s"]) == REPEATS and len(browser_samples["head_switch_s"]) == 2 * REPEATS
    assert browser["prompt_64_s"] == round(statistics.median(browser_samples["prompt_64_s"]), 3)
    assert browser["head_switch_ms"] == round(statistics.median(browser_samples["head_switch_s"]) * 1000, 1)
    assert browser["start_to_first_figure_s"] > browser["prompt_64_s"] > 0  # start includes loading the model
    # the head maps component: its switches were timed in the browser, each with the page's own measure
    for name in ("head_switch", "layer_switch"):  # at 64 tokens every layer is in the page
        in_browser = browser_samples[f"in_browser_{name}_s"]
        assert len(in_browser) == len(browser_samples[f"in_browser_{name}_paint_ms"]) == 2 * REPEATS
        assert all(0 < ms < s * 1000 for ms, s in zip(browser_samples[f"in_browser_{name}_paint_ms"], in_browser))
    assert browser["layer_switch_ms"] == round(statistics.median(browser_samples["layer_switch_s"]) * 1000, 1)
    assert browser["long"] is None  # no --long-tokens
    # the pages asked for, opened cold in a new tab (a context of its own, not the recorded page) and from
    # the recorded page's sidebar, each to its figures drawn after its own script ran
    for kind, opened_ones in (("pages", OPENED_COLD), ("in_app_pages", OPENED)):
        assert sorted(browser[kind]) == sorted(opened_ones), kind
        for name, opened in browser[kind].items():
            assert len(opened["samples"]) == REPEATS and opened["open_s"] == round(statistics.median(opened["samples"]), 3)
            assert 0 < opened["script_start_s"] < opened["script_end_s"] <= opened["open_s"], (kind, name)
            assert opened["first_s"] > 0 and opened["figures"] >= 1, (kind, name)
        assert browser[kind]["attention"]["figures"] >= browser["figures"]  # the component's map counted too
    assert result["targets"]["browser_page_open_s"]["measured"] == max(
        opened["open_s"] for opened in browser["in_app_pages"].values())  # the target is the reader's open

    assert set(result["targets"]) == {name for name in bench_app.TARGETS if "long" not in name}
    for name, target in result["targets"].items():
        assert target["target"] == bench_app.TARGETS[name] and target["met"] == (target["measured"] <= target["target"])


def test_prompts_have_exactly_the_asked_tokens(default_model_home, default_model, monkeypatch):
    from tests.helpers.bench_app import prompts_of

    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    prompts = prompts_of(64, 3)
    assert len(set(prompts)) == 3
    tokenizer = default_model.tokenizer  # the session's load, not the benchmark's
    assert [len(tokenizer.encode(p, bos="sink").ids) for p in prompts] == [64, 64, 64]
