"""A real Streamlit server and headless chromium (Debian's, driven by playwright) for browser tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
# a figure drawn: plotly's own svg in an st.plotly_chart, or the canvas of the Attention page's head maps
# component (app/components/head_maps: its drawHeatmap creates the canvas when it first paints)
CHART = ":is([data-testid='stPlotlyChart'] .js-plotly-plot .main-svg, .txviz-head-plot canvas)"
ERROR = "[data-testid='stException']"


def browser_available() -> str | None:
    """None when the browser test can run, else the reason it cannot. Under CI (``CI=true``) a missing
    browser is an error, never a skip: CI must prove the page works in a real browser."""
    reason = None
    if not Path(CHROMIUM).exists():
        reason = "chromium is not installed (bash .ci/setup test installs it)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "playwright is not installed (bash .ci/setup test installs it)"
    if reason and os.environ.get("CI") == "true":
        raise RuntimeError(f"CI=true and the browser tests cannot run: {reason}")
    return reason


class ServerURL(str):
    """The server's URL, carrying the PID of its process (to measure its memory)."""

    pid: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def streamlit_server(env: dict | None = None, timeout: float = 120.0, app_root: Path = ROOT):
    """Start ``streamlit run app/main.py`` (of ``app_root``: another revision's app for a benchmark) on a
    free loopback port; yield its URL; stop it by its PID."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", str(app_root / "app" / "main.py"), "--server.headless", "true",
               "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
    log = open(os.environ.get("TXVIZ_SERVER_LOG", os.devnull), "w")
    process = subprocess.Popen(command, cwd=app_root, env={**os.environ, **(env or {})}, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    url = ServerURL(f"http://127.0.0.1:{port}")
    url.pid = process.pid
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"streamlit exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.read().decode().strip() == "ok":
                        break
            except OSError:
                time.sleep(0.3)
        else:
            raise TimeoutError("streamlit did not become healthy")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


@contextmanager
def chromium_browser():
    """A headless chromium; open a session per ``browser.new_context()`` (contexts share no cookies)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_idle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the script has started and finished running."""
    page.wait_for_selector(IDLE, timeout=timeout_ms)
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=timeout_ms)


def open_from_sidebar(page, url_path: str) -> None:
    """Go to another page of the app by its sidebar link, as a person does: the same session, no reload of
    the app's scripts (a ``page.goto`` parses them again, ~2 s more per page on this machine under load)."""
    page.locator(f"[data-testid='stSidebarNav'] a[href$='/{url_path}']").click()
    page.wait_for_url(f"**/{url_path}*")


def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TXVIZ_ARTIFACTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
