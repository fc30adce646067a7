"""The browser tests' kept page: one chromium page per worker in which tests load their sessions.

Each ``page.goto`` of the app opens a new websocket, and the server a new Streamlit session (no session
state, widget or prompt of the last test's: tests/browser/test_sessions.py checks that a reload shows
none), while Streamlit's scripts come from the page's HTTP and code caches: an app page opened this way
drew its figures in 4.4-5.4 s against 7.0-7.7 s in a fresh context (load average 4-9, 2026-12-01), the
difference being JavaScript parsed again. Tests that need a browser of their own (cookies, storage,
listeners on the page) keep conftest's ``page``, a fresh context per test.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kept_tab(browser):
    """One 1500 × 1100 page for the worker's browser tests; load the app in it to start a session."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def tab(kept_tab):
    """The kept page; at the test's end it leaves the app (about:blank), which closes its session as closing
    a context did (a session left open would keep running on the shared server)."""
    yield kept_tab
    kept_tab.goto("about:blank")
