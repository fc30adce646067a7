"""The browser tests' kept page: one chromium page per worker in which every test loads its sessions.

Each ``page.goto`` of the app opens a new websocket, and the server a new Streamlit session (no session
state, widget or prompt of the last test's: tests/browser/test_sessions.py checks that a reload shows
none; the app keeps nothing in cookies or storage), while Streamlit's and plotly's scripts come from the
page's HTTP and code caches. Measured 2026-12-02 at load average 3-6, the Attention page to its first
heatmap: 17-18 s and 13-14 CPU s (chromium and server) in a fresh context, 2.8-4.5 s and 3.3 CPU s
reloaded in the kept page, 7.3 s and 6 CPU s in a second page of the kept context; the first load from
another server (another port) costs what a fresh context does.

A test that changes the page (its viewport, a listener) undoes it; ``page`` resets the viewport.
"""

from __future__ import annotations

import pytest

from tests.helpers.browser import CONTEXT_OPTIONS, track_reruns

VIEWPORT = CONTEXT_OPTIONS["viewport"]


def pytest_collection_modifyitems(items):
    """Every test on the session's shared ``server`` goes to one xdist worker, with the trophy pair's tests
    (tests/conftest.py's CAUSAL_MEMO_GROUP, which test_coref's causal run already joins for the memo): one
    server start, one load of the model in it and one first (cold) load of the app in the kept page, not
    one per worker (about 9 CPU s; measured 2026-12-02 at load 3-7: a cold Attention page 6.3-7.3 CPU s of
    chromium and 3.8-4.8 of the server, a reload 2.0-2.4 and 0.2-0.3). The tests on servers of their own
    (test_first_run, tests/app/test_bench_app.py) go to whichever worker is free."""
    from tests.conftest import CAUSAL_MEMO_GROUP

    for item in items:
        if "server" in getattr(item, "fixturenames", ()) and item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.xdist_group(CAUSAL_MEMO_GROUP))


@pytest.fixture(scope="session")
def kept_tab(browser):
    """One 1500 × 1100 page (reduced motion: tests/helpers/browser.py) for the worker's browser tests; load the
    app in it to start a session."""
    context = browser.new_context(**CONTEXT_OPTIONS)
    track_reruns(context)  # wait_idle waits on the page's own count of reruns (tests/helpers/browser.py)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def page(kept_tab):
    """The kept page (this overrides tests/conftest.py's fresh context per test). At the test's end it
    leaves the app (about:blank), which closes its session as closing a context did (a session left open
    would keep running on the shared server), and gets its viewport back."""
    yield kept_tab
    kept_tab.goto("about:blank")
    kept_tab.set_viewport_size(VIEWPORT)
