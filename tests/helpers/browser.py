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
# an exception, or what app/ui/errors.py shows a visitor in its place (the traceback goes to the log)
ERROR = "[data-testid='stException'], [data-testid='stAlert']:has-text('Something went wrong (id')"
# How often a wait_for_function checks its condition. Playwright's default (every animation frame) keeps
# chromium painting at 60 Hz for the whole wait: 1.2-1.9 CPU s per 10 s of waiting on the Heads page,
# against 0.2-0.4 s polled every 100 ms (measured 2026-12-02 at load 7-8), CPU the server then lacks.
POLL_MS = 50
# What every test session's browser context is opened with. Reduced motion (a reader's own setting, which
# Streamlit honours: its spinners turn slower, tab and element entrances do not animate) paints less:
# 11.6-12.0 against 12.6-13.8 chromium CPU s for three loads of the Attention page, three head switches and
# the Heads page (measured 2026-12-02, alternating, load 6-7); no test looks at an animation of Streamlit's.
# The viewport (1280 × 800 against 1500 × 1100) and chromium-headless-shell moved nothing there.
CONTEXT_OPTIONS = {"viewport": {"width": 1500, "height": 1100}, "reduced_motion": "reduce"}


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
def streamlit_server(env: dict | None = None, timeout: float = 120.0, app_root: Path = ROOT, port: int | None = None):
    """Start ``streamlit run app/main.py`` (of ``app_root``: another revision's app for a benchmark) on
    ``port`` (default: a free loopback port); yield its URL; stop it by its PID."""
    port = port or free_port()
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


# Counts, inside each page, the reruns it asked the server for and the runs the server ran, from the protobuf
# frames of the app's websocket: a BackMsg whose field is ``rerun_script`` (11) is a request; a ForwardMsg
# ``new_session`` (4) starts a run, which answers every request sent before it; ``script_finished`` (6) ends
# it, unless its status is FINISHED_EARLY_FOR_RERUN (2: another run follows at once). Streamlit's own
# ``data-test-script-state`` cannot say this alone: a widget's request leaves it "notRunning" until the
# server answers, and a short run may never render as "running".
RUN_TRACKER = r"""(() => {
  if (window.__txvizRuns) return;
  const runs = window.__txvizRuns = {asked: 0, answered: 0, running: false};
  function topFields(bytes) {  // [field number, varint value or offset of the bytes] of a message's top level
    let at = 0;
    const varint = () => { let value = 0, shift = 1, byte;
      do { byte = bytes[at++]; value += (byte & 0x7f) * shift; shift *= 128; } while (byte & 0x80); return value; };
    const fields = [];
    while (at < bytes.length) {
      const tag = varint(), wire = tag & 7;
      if (wire === 0) fields.push([tag >>> 3, varint()]);
      else if (wire === 2) { const length = varint(); fields.push([tag >>> 3, at]); at += length; }
      else break;  // ForwardMsg's top level has no fixed-size fields
    }
    return fields;
  }
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    const first = ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, 1)[0] : undefined;
    if (first === (11 << 3 | 2)) runs.asked += 1;
    return send.apply(this, arguments);
  };
  const seen = (data) => {
    if (!(data instanceof ArrayBuffer)) return;
    for (const [field, value] of topFields(new Uint8Array(data))) {
      if (field === 4) { runs.answered = runs.asked; runs.running = true; }
      if (field === 6 && value !== 2) runs.running = false;
    }
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {  // heard before the app's own listener
    constructor(...args) { super(...args); this.addEventListener('message', (event) => seen(event.data)); }
  };
})()"""
# Settled: every rerun asked for has run to its end, and every element it sent is drawn. Streamlit loads an
# element's code on its first use in a page (a plotly chart's: 2-3.5 s here) and shows a skeleton in its place
# meanwhile, after the run has ended: the Coreference tab's pills were still skeletons when a test read them.
LOADING = "[data-testid='stElementContainer'] > [data-testid='stSkeleton']"
SETTLED = """() => { const runs = window.__txvizRuns;
  return runs.answered === runs.asked && !runs.running && document.querySelector("%s") !== null
    && document.querySelector("%s") === null; }""" % (IDLE, LOADING)


def track_reruns(context) -> None:
    """Count every page's reruns in ``context`` (RUN_TRACKER), so that ``wait_idle`` waits on them."""
    context.add_init_script(RUN_TRACKER)


def rerun_mark(page) -> int:
    """The number of reruns the page has asked for so far: give it to ``wait_idle`` as ``since`` when the
    action that follows asks for its rerun later (an upload, once its file is sent)."""
    return page.evaluate("() => window.__txvizRuns.asked")


def wait_idle(page, timeout_ms: int = 120_000, since: int | None = None) -> None:
    """Wait until every rerun the page asked for has run to its end and its elements are drawn (with
    ``since``: and one was asked after that ``rerun_mark``). A page outside a ``track_reruns`` context waits
    as before: idle, 300 ms (for a rerun to start), idle."""
    if not page.evaluate("() => window.__txvizRuns !== undefined"):
        page.wait_for_selector(IDLE, timeout=timeout_ms)
        page.wait_for_timeout(300)
        page.wait_for_selector(IDLE, timeout=timeout_ms)
        return
    if since is not None:
        page.wait_for_function("n => window.__txvizRuns.asked > n", arg=since, timeout=timeout_ms, polling=POLL_MS)
    page.wait_for_function(SETTLED, timeout=timeout_ms, polling=POLL_MS)


def wait_until_drawn(page, condition: str, arg=None, *, seen: str, what: str, timeout_ms: int = 30_000) -> None:
    """Wait until ``condition`` (a JavaScript function of ``arg``) holds in the page. For what the browser
    draws after the run has ended (a custom component once its data has come, a plotly chart once it has
    mounted), which ``wait_idle`` does not wait for. On a timeout, fail saying ``what`` was awaited and what
    ``seen`` (a JavaScript function of ``arg``) reads in the page then."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(condition, arg=arg, timeout=timeout_ms, polling=POLL_MS)
    except PlaywrightTimeout as error:
        raise AssertionError(f"{what}: not so after {timeout_ms / 1000:.0f} s; the page shows "
                             f"{page.evaluate(seen, arg)!r}") from error


def wait_sessions_left(url: str, timeout: float = 60.0) -> None:
    """Wait until the server has let go of every tab that left: its ``active_sessions`` gauge (Streamlit's
    /_stcore/metrics) is 0, so each of their websockets is closed and its script stopped. (A session that left
    stays stored for server.disconnectedSessionTTL, and is removed at the next session's departure after that.)"""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=10) as response:
            if "\nactive_sessions 0\n" in "\n" + response.read().decode() + "\n":
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} still holds a connected session after {timeout:.0f} s")
        time.sleep(0.05)


def open_from_sidebar(page, url_path: str) -> None:
    """Go to another page of the app by its sidebar link, as a person does: the same session, no reload of
    the app's scripts (a ``page.goto`` parses them again, ~2 s more per page on this machine under load)."""
    page.locator(f"[data-testid='stSidebarNav'] a[href$='/{url_path}']").click()
    page.wait_for_url(f"**/{url_path}*")


def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TXVIZ_ARTIFACTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


PAGE_HEAD = """([layer, head]) => {  // the Attention page's views below the map show this head (any layer: null)
  const title = [...document.querySelectorAll('h3')].map((h) => h.innerText.trim())
    .find((text) => text.startsWith('Head view: layer '));
  const grid = document.querySelector('.txviz-head-grid')?.dataset.selected;
  return title !== undefined && title.endsWith(`, head ${head}`) && grid?.endsWith(`:${head}`)
    && (layer === null || (title === `Head view: layer ${layer}, head ${head}` && grid === `${layer}:${head}`));
}"""


def wait_page_head(page, layer: int | None, head: int, timeout_ms: int = 120_000) -> None:
    """Wait until the Attention page's head view and the grid's highlight show ``head`` of ``layer``."""
    page.wait_for_function(PAGE_HEAD, arg=[layer, head], timeout=timeout_ms, polling=POLL_MS)
