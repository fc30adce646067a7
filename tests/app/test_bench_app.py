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

    def __init__(self, browser, pages: list, contexts: list):
        self._browser, self._pages, self._contexts = browser, pages, contexts

    def new_page(self, *args, **kwargs):
        page = self._browser.new_page(*args, **kwargs)
        self._pages.append(page)
        return page

    def new_context(self, *args, **kwargs):  # the cold opens' new tabs
        context = self._browser.new_context(*args, **kwargs)
        self._contexts.append(context)
        return context

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
    seen = {"runs": [], "servers": [], "pages": [], "contexts": [], "at_exit": []}
    real_check, real_server = bench_app._check, browser.streamlit_server

    def check(at):
        real_check(at)
        seen["runs"].append({"charts": [c.proto.id for c in [*at.get("plotly_chart"), *at.get("bidi_component")]],
                             "head": at.session_state["head"], "layer": at.session_state["layer"],
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
            yield _RecordingBrowser(shared_chromium, seen["pages"], seen["contexts"])
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
    # the last switches timed are the ones drawn: the map is the page's control, so its head switches (after
    # the round trips) and its layer switches (↓, then the slider's round trips) moved the page
    last_head = (bench_app._cycle(config.n_heads, 2 * REPEATS)[-1] + 2 * REPEATS) % config.n_heads
    assert re.search(rf"Layer {4 * REPEATS}, head {last_head}([^0-9]|$)", page["heatmap"])
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
    # the recorded page drew the Attention page first, so its new tabs are its samples, with no cold first open
    assert len(watched["contexts"]) == REPEATS and browser["pages"]["attention"]["first_s"] == round(
        browser["pages"]["attention"]["samples"][0], 3)
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


# The Attention page as the benchmark sees it before a new prompt: the map, a grid and a head view that have
# each painted once (app/components), and a page that counts its reruns (browser.RUN_TRACKER's object).
DRAWN_ONCE = """<div data-testid="stApp" data-test-script-state="notRunning">
  <div class="st-key-heatmap">Layer 0, head 0: the old prompt</div>
  <div class="st-key-head_grid"><div class="txviz-head-grid" data-painted="1"><canvas></canvas></div></div>
  <div class="st-key-head_view"><div class="txviz-head-view" data-painted="1"><svg></svg></div></div>
</div>
<script>
  window.__txvizRuns = {asked: 4, answered: 4, running: false};
  document.querySelector('.txviz-head-grid').txvizData = {prompt: 'old'};
  document.querySelector('.txviz-head-view').txvizFigure = {prompt: 'old'};
</script>"""


def test_a_new_prompt_is_drawn_once_every_figure_shows_it(browser):
    """bench_app.wait_drawn ends on the new prompt's paints: not before the run asked for has ended, not
    on a component that painted its old data again, and not never when a component's root is rebuilt
    (its paint count starts again and can read what was marked)."""
    reason = browser_available()
    if reason:
        pytest.skip(reason)
    from tests.helpers import bench_app

    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content(DRAWN_ONCE)
        before = bench_app.mark_drawn(page)
        assert before == {"asked": 4, "text": "Layer 0, head 0: the old prompt", "plotly": "[]"}
        drawn = lambda: page.evaluate(f"arg => ({bench_app.DRAWN_AGAIN})(arg)", [before, 2])  # noqa: E731
        ran = lambda: page.evaluate(f"arg => ({bench_app.RAN_SINCE})(arg)", before["asked"])  # noqa: E731
        assert not ran()  # idle, but the new prompt's run is not asked for yet

        page.evaluate("""() => {  // Ctrl+Enter asked for a run; the server has not answered yet
          window.__txvizRuns.asked = 5;
          document.querySelector('.st-key-heatmap').textContent = 'Layer 0, head 0: the new prompt';
          const grid = document.querySelector('.txviz-head-grid');  // a resize: the old data painted again
          grid.dataset.painted = '2';
          const view = document.createElement('div');  // the head view's root rebuilt, painted once
          view.className = 'txviz-head-view';
          view.dataset.painted = '1';
          view.txvizFigure = {prompt: 'new'};
          view.append(document.createElementNS('http://www.w3.org/2000/svg', 'svg'));
          document.querySelector('.st-key-head_view').replaceChildren(view);
        }""")
        assert not ran()
        page.evaluate("() => { window.__txvizRuns.answered = 5; }")
        assert ran()
        assert not drawn()  # the grid shows the old prompt
        page.evaluate("""() => { const grid = document.querySelector('.txviz-head-grid');
          grid.txvizData = {prompt: 'new'}; grid.dataset.painted = '3'; }""")
        assert drawn()
        bench_app.wait_drawn(page, before, figures=2, timeout_ms=10_000)  # returns: both waits hold
        assert not page.evaluate(f"arg => ({bench_app.DRAWN_AGAIN})(arg)", [before, 3])  # two figures, not three
        page.evaluate("() => { delete window.__txvizRuns; }")  # a page that does not count its reruns (as before:
        assert bench_app.mark_drawn(page)["asked"] is None and ran()  # idle; tests/helpers/chrome_profile.py)
    finally:
        context.close()
