"""App latency on the default model, measured in one run (the app half of ``txviz bench``).

    python -m tests.helpers.bench_app            # a table with each target met or missed
    python -m tests.helpers.bench_app --json     # the raw figures
    python -m tests.helpers.bench_app --long-tokens 1024 --baseline 298fdc4   # + 1024 tokens, + an old app

Server side, through Streamlit's AppTest (the page script run in this process, no browser): a head or
layer switch on a cached trace, and a new 64-token prompt to every figure of the Attention page. In a
real browser (``streamlit run`` + headless chromium, the browser-test harness): process start to the
first drawn figure with the weights already cached, a new 64-token prompt to every figure drawn, a head
switch by the page (a round trip: a click on the map's head bar until the views below follow it; the
Head box of a revision that has one) and in the head maps component alone (in the browser: ``in_browser_head_switch_ms`` from Python, ``..._paint_ms`` from the click event to the frame
after the repaint, measured by the page), a layer switch in the component (↓: in the browser when every
layer is in the page, else the layer's maps brought by the page's rerun) and by the page's slider (its
arrow key until the views below follow, a round trip); with ``--long-tokens N`` the same switches on an N-token
prompt; and every page of the app (app/app_pages) opened at the default prompt with the model loaded, to
its last figure drawn, two ways: by its link in the sidebar of the tab already open, as a reader does
(``in_app_pages``, the target), and cold, in a new tab of a new browser context (``pages``: an empty HTTP
cache and a new Streamlit session, so Streamlit's bundle and element chunks are fetched and parsed
again); each with the first open, then the median of the next (the Attention page, which the benchmark's
tab drew first, has no cold first open: its first new tab is its first sample), and when the page's
script started and stopped, so the rest is the browser's. ``--pages`` picks some pages, ``--cold-pages``
some of the new tabs, ``--no-cold-pages`` skips them. ``--baseline REV`` runs the browser half a second
time on the app of git revision REV (its ``app/``, ``assets/`` and ``.streamlit/`` exported to a temporary
folder, the library from this tree; its pages from the sidebar only), so before and after share one run
and one load.
Medians over ``--repeats``; every sample is in the JSON, with the load average.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

from tests.helpers.apptest import pick_head
from tests.helpers.browser import CHART, IDLE, SETTLED

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
TEXT = (ROOT / "assets" / "texts" / "how_a_model_reads.txt").read_text(encoding="utf-8")
TARGETS = {"server_head_switch_ms": 100.0, "server_prompt_64_s": 1.0, "browser_prompt_64_s": 0.7,
           "browser_start_to_first_figure_s": 10.0, "browser_head_switch_ms": 150.0, "browser_layer_switch_ms": 150.0,
           "browser_head_switch_long_ms": 300.0, "browser_layer_switch_long_ms": 300.0,  # long: 1024 tokens
           "browser_page_open_s": 1.5}  # every page, the slowest one's median (model and page caches warm)
FIRST_PAGE = "attention"  # what "/" opens (app/main.py's HOME), with the default prompt
PAGES = sorted(folder.name.replace("_", "-") for folder in (ROOT / "app" / "app_pages").iterdir()
               if (folder / "page.py").exists())  # their url paths (app/main.py: kv_cache is served at kv-cache)
# Every figure of the page drawn: the script ran and stopped, nothing stale is left, no element is still a
# skeleton (Streamlit draws a chart or widget once its code has loaded, after the script), every plotly
# chart has drawn its SVG, every head maps component has painted and the head grid and head view (app/components;
# plotly charts in older revisions) have painted. window.txvizRan is set by OPEN_WATCH.
PAGE_DRAWN = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  if (!window.txvizRan || !app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector("[data-stale='true'], [data-testid='stSkeleton']")) return false;
  if (!document.querySelector("[data-testid='stMain'] h1")) return false;
  const charts = [...document.querySelectorAll("[data-testid='stPlotlyChart']")];
  return charts.every(c => c.querySelector('.main-svg'))
    && [...document.querySelectorAll('.txviz-head-maps')].every(m => m.dataset.painted)
    && [...document.querySelectorAll('.st-key-head_grid, .st-key-head_view')]
      .every(k => k.querySelector('[data-painted], .main-svg'));  // painted, or an older app's plotly chart
}"""
OPEN_WATCH = """new MutationObserver(() => {  // when the page's script first started and last stopped
  const app = document.querySelector("[data-testid='stApp']"), state = app && app.getAttribute('data-test-script-state');
  if (state === 'running' && !window.txvizRan) window.txvizRan = performance.now();
  if (state === 'notRunning' && window.txvizRan) window.txvizStopped = performance.now();
}).observe(document, {attributes: true, subtree: true, attributeFilter: ['data-test-script-state']});"""
HEAD_MAPS = ".st-key-heatmap .txviz-head-maps"
# A figure drawn, as the report counts them: a plotly chart's SVGs (three each) or the head maps canvas
# (tests/helpers/browser.CHART), or the Attention page's head grid or head view painted (app/components).
FIGURE = f"{CHART}, .txviz-head-grid[data-painted] canvas, .txviz-head-view[data-painted] svg"
HOLDS_LAYER = """([selector, layer]) => {
  const layers = document.querySelector(selector)?.dataset.layers;
  return layers === undefined || layers.split(',').includes(String(layer));
}"""
PREFETCH_WAIT_S = 30
# A new prompt is drawn when the run it asked for has ended (RUN_TRACKER's count: the DOM's script state can
# read "notRunning" before the server has answered) and then every figure shows the new prompt: the map's
# text changed, the plotly charts hold other data, and each component root (app/components: the head maps,
# grid and head view keep their element and count their paints in data-painted) painted again with data
# that is not what it held before; a root built since the mark counts as painted. Roots are marked in the
# page by identity, not by their order or count: a rebuilt root starts its count again (it could come back
# to the value marked), and a root that painted the old data once more (a resize) does not end the wait.
COMPONENTS = ".txviz-head-maps, .txviz-head-grid, .txviz-head-view"
PLOTLY_DATA = """() => JSON.stringify([...document.querySelectorAll("[data-testid='stPlotlyChart'] .js-plotly-plot")]
  .map(p => (p.data || []).map(t => t.y)))"""
MARK = f"""() => {{
  const shown = (root) => root.txvizData ?? root.txvizFigure;  // what the component last painted (its data)
  window.txvizMarked = new Map([...document.querySelectorAll({COMPONENTS!r})]
    .map(root => [root, [root.dataset.painted, shown(root)]]));
  return {{text: document.querySelector('.st-key-heatmap')?.innerText ?? null, plotly: ({PLOTLY_DATA})()}};
}}"""
RAN_SINCE = f"""asked => window.__txvizRuns ? window.__txvizRuns.asked > asked && ({SETTLED})()
  : document.querySelector({IDLE!r}) !== null"""  # a page that does not count its reruns: idle, as before
DRAWN_AGAIN = f"""([before, figures]) => {{
  const marked = window.txvizMarked, roots = [...document.querySelectorAll({COMPONENTS!r})];
  const repainted = roots.length >= marked.size && roots.every(root => {{
    const [painted, data] = marked.get(root) ?? [], shown = root.txvizData ?? root.txvizFigure;
    return root.dataset.painted !== undefined && root.dataset.painted !== painted
      && (shown === undefined || shown !== data);
  }});
  return repainted && (document.querySelector('.st-key-heatmap')?.innerText ?? null) !== before.text
    && (before.plotly === '[]' || ({PLOTLY_DATA})() !== before.plotly)
    && document.querySelectorAll({FIGURE!r}).length >= figures;
}}"""


@functools.cache
def _tokenizer_and_config():
    """The default model's tokenizer and config, read once per process from its GGUF header (no weights:
    the prompts and the head and layer cycles need these, the timings do not; the app loads its own model)."""
    from txviz.loading.fetch import DEFAULT_MODEL, ensure
    from txviz.loading.gguf.loader import config_from_header, read_gguf_header, tokenizer_from_header

    header = read_gguf_header(ensure(DEFAULT_MODEL))
    return tokenizer_from_header(header), config_from_header(header)


def prompts_of(n_tokens: int, count: int) -> list[str]:
    """``count`` different prompts of exactly ``n_tokens`` tokens (sink included), so that none is cached."""
    tokenizer, _ = _tokenizer_and_config()
    prompts = []
    for i in range(count):
        text = f"Note {i + 1}. " + (TEXT * (1 + n_tokens // 600))[i * 40:]  # the text is ~1,000 tokens
        encoding = tokenizer.encode(text, bos="sink")
        cut = encoding.offsets[n_tokens - 1][1]  # the sink token adds one; the text keeps n - 1
        prompt = text[:cut]
        while len(tokenizer.encode(prompt, bos="sink").ids) > n_tokens:  # a merge across the cut
            prompt = prompt[:-1]
        prompts.append(prompt)
    return prompts


def _cycle(n: int, count: int) -> list[int]:
    """``count`` values in 1 … n−1, then 0, …, each different from the one before (heads, layers)."""
    return [(i + 1) % n for i in range(count)]


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 1)


def server_latency(repeats: int, n_tokens: int = 64) -> dict:
    """Seconds of the page script per interaction, in this process (AppTest)."""
    from streamlit.testing.v1 import AppTest

    prompts = prompts_of(n_tokens, repeats + 1)
    at = AppTest.from_file(MAIN, default_timeout=600)
    at.query_params["prompt"] = prompts[0]
    started = time.perf_counter()
    at.run()  # loads the model: not a latency, reported apart
    first_run = time.perf_counter() - started
    _check(at)

    def timed(action) -> float:
        started = time.perf_counter()
        action().run()
        _check(at)
        return time.perf_counter() - started

    config = _config()
    heads = [timed(lambda h=h: pick_head(at, head=h)) for h in _cycle(config.n_heads, 2 * repeats)]
    layers = [timed(lambda layer=layer: pick_head(at, layer=layer)) for layer in _cycle(config.n_layers, 2 * repeats)]
    new_prompts = [timed(lambda p=p: at.sidebar.text_area(key="prompt").input(p)) for p in prompts[1:]]
    return {"first_run_s": round(first_run, 2), "head_switch_ms": _median_ms(heads),
            "layer_switch_ms": _median_ms(layers), "prompt_64_s": round(statistics.median(new_prompts), 3),
            "samples": {"head_switch_s": heads, "layer_switch_s": layers, "prompt_64_s": new_prompts}}


def _config():
    return _tokenizer_and_config()[1]


def _check(at) -> None:
    if at.exception or at.error:
        raise RuntimeError(f"the page failed: {[e.value for e in [*at.exception, *at.error]]}")


def _new_prompt(page, prompt: str, n_charts: int) -> float:
    """Seconds from Ctrl+Enter in the prompt box to every figure of the new prompt drawn (``wait_drawn``)."""
    from tests.helpers.browser import wait_idle

    box = page.locator(".st-key-prompt textarea")
    box.fill(prompt)
    before = mark_drawn(page)
    started = time.perf_counter()
    box.press("Control+Enter")
    wait_drawn(page, before, n_charts)
    seconds = time.perf_counter() - started
    wait_idle(page)
    return seconds


def mark_drawn(page) -> dict:
    """What the page shows before an action that redraws it (MARK), and the reruns it has asked for, where
    it counts them (``browser.track_reruns`` or RUN_TRACKER as an init script; else None)."""
    return {"asked": page.evaluate("() => window.__txvizRuns?.asked ?? null"), **page.evaluate(MARK)}


def wait_drawn(page, before: dict, figures: int = 0, polling: str | int = "raf", timeout_ms: int = 600_000) -> None:
    """Wait until a rerun asked after ``before`` (``mark_drawn``) has ended and every figure shows its
    result, at least ``figures`` of them (FIGURE). Both end on the event they wait for, checked at every
    frame by default (the caller times them); the bound only catches a hang."""
    page.wait_for_function(RAN_SINCE, arg=before["asked"], timeout=timeout_ms, polling=polling)
    page.wait_for_function(DRAWN_AGAIN, arg=[before, figures], timeout=timeout_ms, polling=polling)


def _title_shows(page, pattern: str, arg: int) -> None:
    """Wait until the map's title matches ``pattern`` % arg (a regular expression) and the map is drawn."""
    page.wait_for_function(f"n => new RegExp({pattern!r}.replace('%', n)).test("
                           "document.querySelector('.st-key-heatmap')?.innerText ?? '')", arg=arg, timeout=120_000)
    page.wait_for_selector(f".st-key-heatmap {CHART}")


def _page_head_switch(page, head: int) -> float:
    """Seconds from a head switch to the page showing that head (a round trip): a click on the head in the
    map's head bar until the views below follow it, or, in a revision with a Head box (or a long prompt's
    page), Enter in it until the map of that head is drawn."""
    from tests.helpers.browser import wait_idle, wait_page_head

    box = page.locator(".st-key-head input")
    if box.count() == 0:
        started = time.perf_counter()
        page.locator(f"{HEAD_MAPS} .txviz-head-bar button[data-head='{head}']").click()
        wait_page_head(page, None, head)
    else:
        box.fill(str(head))
        started = time.perf_counter()
        box.press("Enter")
        _title_shows(page, ", head %([^0-9]|$)", head)  # the title's own head, not "KV head N" that it shares
    seconds = time.perf_counter() - started
    wait_idle(page)
    return seconds


def _component_switch(page, act, painted: str) -> tuple[float, float]:
    """(seconds seen from here, milliseconds the page measured from the click or key event to the frame
    after the repaint) of ``act()`` in the head maps component (no round trip), done when ``painted``
    (attributes of the component's root, e.g. "[data-head='3']") holds."""
    page.locator(HEAD_MAPS).evaluate("root => delete root.dataset.switchMs")
    started = time.perf_counter()
    act()
    page.wait_for_selector(f"{HEAD_MAPS}{painted}[data-switch-ms]", timeout=60_000)
    seconds = time.perf_counter() - started
    return seconds, float(page.locator(HEAD_MAPS).get_attribute("data-switch-ms"))


def _component_head_switch(page, head: int) -> tuple[float, float]:
    """A click on a head in the head maps component."""
    button = page.locator(f"{HEAD_MAPS} .txviz-head-bar button[data-head='{head}']")
    return _component_switch(page, button.click, f"[data-head='{head}']")


def _component_layer_switch(page, layer: int) -> tuple[float, float]:
    """↓ in the head maps component: the next layer (fetched when the browser does not have it). First a
    reader's pause: up to PREFETCH_WAIT_S for the layer to be in the browser, where the component says
    which layers it holds (on a long prompt it prefetches the painted layer's neighbours while idle); an
    app that does not say (an older revision) is measured at once, as it has nothing to wait for."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from tests.helpers.browser import POLL_MS

    try:  # not timed: no need to check at every frame
        page.wait_for_function(HOLDS_LAYER, arg=[HEAD_MAPS, layer], timeout=PREFETCH_WAIT_S * 1000, polling=POLL_MS)
    except PlaywrightTimeout:
        pass  # not prefetched in time: measured as a fetch
    return _component_switch(page, lambda: page.locator(HEAD_MAPS).press("ArrowDown"), f"[data-layer='{layer}']")


def layer_slider(page):
    """The page's one Layer slider: the map's, or, in a revision with a slider of the page's own (or a long
    prompt's page), that one."""
    own = page.locator(".st-key-layer input[type='range']")
    return own if own.count() else page.locator(f"{HEAD_MAPS} .txviz-layer input[type='range']")


def _layer_switch(page, layer: int) -> float:
    """Seconds from the layer slider's arrow key (one layer up) to that layer shown by the page (a round
    trip): the map's layer, and the views below where the map's slider is the page's."""
    from tests.helpers.browser import wait_idle, wait_page_head

    thumb = layer_slider(page)
    follows = page.locator(".st-key-layer").count() == 0
    thumb.focus()
    started = time.perf_counter()
    thumb.press("ArrowRight")
    _title_shows(page, "Layer %,", layer)
    if follows:
        head = int(page.locator(HEAD_MAPS).get_attribute("data-head"))
        wait_page_head(page, layer, head)
    seconds = time.perf_counter() - started
    wait_idle(page)
    return seconds


def _switches(page, repeats: int, has_component: bool) -> dict:
    """Head switches (round trips, then the component's paints) and layer switches on the prompt shown."""
    config = _config()
    heads = _cycle(config.n_heads, 2 * repeats)
    samples = {"head_switch_s": [_page_head_switch(page, h) for h in heads]}
    in_browser = {}
    if has_component:  # the page's head is heads[-1]: start the component's cycle one further on
        picked = [(heads[-1] + 1 + i) % config.n_heads for i in range(2 * repeats)]
        in_browser["head_switch"] = [_component_head_switch(page, h) for h in picked]
        if page.locator(f"{HEAD_MAPS} .txviz-layer").is_visible():  # every layer is in the page
            in_browser["layer_switch"] = [_component_layer_switch(page, layer) for layer in range(1, 1 + 2 * repeats)]
    start = int(layer_slider(page).input_value())  # where the map's switches left the page (the map is its control)
    samples["layer_switch_s"] = [_layer_switch(page, layer) for layer in range(start + 1, start + 1 + 2 * repeats)]
    result = {"head_switch_ms": _median_ms(samples["head_switch_s"]),
              "layer_switch_ms": _median_ms(samples["layer_switch_s"])}
    for name, measured in in_browser.items():
        samples[f"in_browser_{name}_s"] = [m[0] for m in measured]
        samples[f"in_browser_{name}_paint_ms"] = [m[1] for m in measured]
        result[f"in_browser_{name}_ms"] = _median_ms(samples[f"in_browser_{name}_s"])
        result[f"in_browser_{name}_paint_ms"] = round(statistics.median(samples[f"in_browser_{name}_paint_ms"]), 1)
    return result | {"samples": samples}


def browser_latency(repeats: int, n_tokens: int = 64, long_tokens: int = 0, app_root: Path | None = None,
                    pages: bool = True, cold_pages: bool = True, page_names: list[str] | None = None,
                    cold_names: list[str] | None = None) -> dict:
    """Seconds seen in headless chromium against a ``streamlit run`` server started here (on the app in
    ``app_root``, default this tree); with ``pages`` every page's (or ``page_names``') open time from the
    sidebar of the open tab too, and with ``cold_pages`` its (or ``cold_names``') cold open in a new tab."""
    from tests.helpers.browser import (ERROR, POLL_MS, RUN_TRACKER, chromium_browser, rerun_mark, streamlit_server,
                                       wait_idle)

    prompts = prompts_of(n_tokens, repeats)
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(RUN_TRACKER)  # wait_idle then waits on the reruns asked, not a 300 ms pause
        page.add_init_script(OPEN_WATCH)
        started = time.perf_counter()
        with streamlit_server(**({"app_root": app_root} if app_root else {})) as url:
            page.goto(url)
            page.wait_for_selector(f".st-key-heatmap {CHART}", timeout=300_000)
            start_to_figure = time.perf_counter() - started
            wait_idle(page)
            page.wait_for_function(PAGE_DRAWN, timeout=120_000, polling=POLL_MS)  # under load a chart may still be
            n_charts = page.locator(FIGURE).count()  # loading: counted early, a new prompt would wait for fewer
            has_component = page.locator(HEAD_MAPS).count() > 0
            opens = (page_opens(browser, url, repeats, cold_names or page_names, drawn=FIRST_PAGE)
                     if pages and cold_pages else None)
            in_app = in_app_opens(page, repeats, page_names) if pages else None
            wait_idle(page)

            prompt_times = [_new_prompt(page, prompt, n_charts) for prompt in prompts]
            switches = _switches(page, repeats, has_component)
            long = None
            if long_tokens:
                layer_slider(page).focus()
                asked = rerun_mark(page)
                for _ in range(2 * repeats):  # back to layer 0, as on the short prompt
                    page.keyboard.press("ArrowLeft")
                wait_idle(page, since=asked)
                _title_shows(page, "Layer %,", 0)
                wait_idle(page)
                long = {"tokens": long_tokens,
                        "prompt_s": round(_new_prompt(page, prompts_of(long_tokens, 1)[0], n_charts), 3)}
                long |= _switches(page, repeats, has_component)
            if page.locator(ERROR).count():
                raise RuntimeError("the page shows an exception")
    samples = switches.pop("samples")
    return {"start_to_first_figure_s": round(start_to_figure, 2), "figures": n_charts,
            "prompt_64_s": round(statistics.median(prompt_times), 3), **switches, "long": long, "pages": opens,
            "in_app_pages": in_app,
            "samples": {"prompt_64_s": prompt_times, **samples}}


def _open_page(browser, url: str) -> tuple[float, int, tuple[float, float]]:
    """(seconds from navigating a new tab to ``url`` to its last figure drawn, figures drawn, (seconds to
    the script's start, to its end): what the rest is the browser's), in a new browser context: a new
    Streamlit session at the default prompt, on a server whose model is loaded."""
    from tests.helpers.browser import ERROR

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.add_init_script(OPEN_WATCH)
        page.goto(url)
        page.wait_for_function(PAGE_DRAWN, timeout=600_000, polling="raf")
        seconds = page.evaluate("performance.now()") / 1000  # since the navigation began
        script = tuple(round(t / 1000, 3) for t in page.evaluate("[window.txvizRan, window.txvizStopped]"))
        if page.locator(ERROR).count():
            raise RuntimeError(f"{url} shows an exception")
        return seconds, page.locator(FIGURE).count(), script
    finally:
        context.close()


def page_opens(browser, url: str, repeats: int, names: list[str] | None = None, drawn: str | None = None) -> dict:
    """The cold new-tab open of every page (or of ``names``): a new browser context each time (an empty
    HTTP cache, a new Streamlit session); the first open on this server (the page's own caches cold; the
    model loaded) and ``repeats`` more (warm), seconds to the last figure drawn. The page ``drawn`` on this
    server already (the benchmark's own tab) has no cold first open: its first is the first of its samples."""
    pages = {}
    for name in names or PAGES:
        cold = name != drawn
        opens = [_open_page(browser, f"{url}/{name}") for _ in range(cold + repeats)]
        (first, figures, _), warm = opens[0], opens[cold:]
        seconds = [s for s, _, _ in warm]
        pages[name] = {"first_s": round(first, 3), "open_s": round(statistics.median(seconds), 3), "figures": figures,
                       "script_start_s": statistics.median(script[0] for _, _, script in warm),
                       "script_end_s": statistics.median(script[1] for _, _, script in warm), "samples": seconds}
    return pages


def _open_in_app(page, name: str) -> tuple[float, int, tuple[float, float]]:
    """(seconds from a click on ``name``'s link in the sidebar navigation to that page's last figure drawn,
    figures drawn, (seconds to its script's start, to its end)) in the tab already open: what a reader
    does. The same "drawn" as a new tab's (PAGE_DRAWN); the tab runs OPEN_WATCH."""
    from tests.helpers.browser import ERROR, open_from_sidebar

    clicked = page.evaluate("() => { window.txvizRan = window.txvizStopped = undefined; return performance.now(); }")
    open_from_sidebar(page, name)
    page.wait_for_function(PAGE_DRAWN, timeout=120_000, polling="raf")
    ended, ran, stopped = page.evaluate("[performance.now(), window.txvizRan, window.txvizStopped]")
    if page.locator(ERROR).count():
        raise RuntimeError(f"{name} shows an exception")
    return (ended - clicked) / 1000, page.locator(FIGURE).count(), (round((ran - clicked) / 1000, 3),
                                                                    round((stopped - clicked) / 1000, 3))


def in_app_opens(page, repeats: int, names: list[str] | None = None) -> dict:
    """Every page (or ``names``) opened from the tab the reader has open, by its sidebar link, in rounds
    that each end back on the Attention page: a first round (this session's first visit: the page's own
    caches may be cold), then ``repeats`` more, seconds to the last figure drawn."""
    order = [name for name in names or PAGES if name != "attention"] + ["attention"]
    first = {name: _open_in_app(page, name)[0] for name in order}
    seen = {name: [] for name in order}
    for _ in range(repeats):
        for name in order:
            seen[name].append(_open_in_app(page, name))
    return {name: {"first_s": round(first[name], 3), "open_s": round(statistics.median(s for s, _, _ in opens), 3),
                   "figures": opens[-1][1],
                   "script_start_s": statistics.median(script[0] for _, _, script in opens),
                   "script_end_s": statistics.median(script[1] for _, _, script in opens),
                   "samples": [s for s, _, _ in opens]} for name, opens in seen.items()}


def _export_app(revision: str, folder: Path) -> Path:
    """The app and library of ``revision`` (app/, txviz/, assets/, .streamlit/) exported into ``folder``:
    its server runs there (cwd first on sys.path), so the old app imports the old library, whose module
    layout it was written against."""
    import subprocess
    import tarfile
    import io

    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "app", "txviz", "assets", ".streamlit"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def run(repeats: int = 5, browser: bool = True, long_tokens: int = 0, baseline: str | None = None,
        pages: bool = True, cold_pages: bool = True, page_names: list[str] | None = None,
        cold_names: list[str] | None = None) -> dict:
    import tempfile

    import torch

    result = {"threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "repeats": repeats,
              "load_average": os.getloadavg(), "server": server_latency(repeats)}
    result["browser"] = browser_latency(repeats, long_tokens=long_tokens, pages=pages, cold_pages=cold_pages,
                                        page_names=page_names, cold_names=cold_names) if browser else None
    if browser and baseline:
        with tempfile.TemporaryDirectory(prefix="txviz-baseline-") as folder:
            result["baseline"] = {"revision": baseline, **browser_latency(
                repeats, long_tokens=long_tokens, app_root=_export_app(baseline, Path(folder)), pages=pages,
                cold_pages=False, page_names=page_names)}  # the cold opens: this tree's only (a minute more)
    result["load_average_after"] = os.getloadavg()
    measured = {"server_head_switch_ms": result["server"]["head_switch_ms"],
                "server_prompt_64_s": result["server"]["prompt_64_s"]}
    if result["browser"]:
        found = result["browser"]
        measured |= {"browser_prompt_64_s": found["prompt_64_s"],
                     "browser_start_to_first_figure_s": found["start_to_first_figure_s"],
                     "browser_head_switch_ms": found.get("in_browser_head_switch_ms", found["head_switch_ms"]),
                     "browser_layer_switch_ms": found.get("in_browser_layer_switch_ms", found["layer_switch_ms"]),
                     **({"browser_page_open_s": max(opened["open_s"] for opened in found["in_app_pages"].values())}
                        if found["in_app_pages"] else {})}
        if found["long"]:
            long = found["long"]
            measured |= {"browser_head_switch_long_ms": long.get("in_browser_head_switch_ms", long["head_switch_ms"]),
                         "browser_layer_switch_long_ms": long.get("in_browser_layer_switch_ms", long["layer_switch_ms"])}
    result["targets"] = {name: {"measured": value, "target": TARGETS[name], "met": value <= TARGETS[name]}
                         for name, value in measured.items()}
    return result


def _browser_line(name: str, found: dict) -> str:
    line = (f"{name}: start → first figure {found['start_to_first_figure_s']} s · new 64-token prompt → all "
            f"{found['figures']} figures {found['prompt_64_s']} s · " + _switch_line(found))
    if found["long"]:
        line += f"\n  {found['long']['tokens']} tokens: prompt {found['long']['prompt_s']} s · " + _switch_line(found["long"])
    if found.get("in_app_pages"):
        line += ("\n  open from the sidebar of the open tab → last figure drawn (first visit / median of the next): "
                 + " · ".join(f"{name} {o['first_s']} / {o['open_s']} s ({o['figures']} figures; script "
                              f"{o['script_start_s']}–{o['script_end_s']} s)" for name, o in found["in_app_pages"].items()))
    if found.get("pages"):
        line += ("\n  cold open in a new tab → last figure drawn (first open on this server / median of the "
                 "samples): ") + " · ".join(
            f"{name} {o['first_s']} / {o['open_s']} s ({o['figures']} figures; script {o['script_start_s']}–"
            f"{o['script_end_s']} s)" for name, o in found["pages"].items())
    return line


def _switch_line(found: dict) -> str:
    line = (f"round trips: head switch (the page follows) {found['head_switch_ms']} ms · layer switch (slider) "
            f"{found['layer_switch_ms']} ms")
    for name in ("head_switch", "layer_switch"):
        if f"in_browser_{name}_ms" in found:
            line += (f" · in the browser: {name.replace('_', ' ')} {found[f'in_browser_{name}_ms']} ms "
                     f"({found[f'in_browser_{name}_paint_ms']} ms event → painted, measured by the page)")
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.bench_app", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=5, help="samples per interaction (default 5)")
    parser.add_argument("--no-browser", action="store_true", help="server side only (no chromium)")
    parser.add_argument("--long-tokens", type=int, default=0,
                        help="also switch heads and layers on a prompt of this many tokens (e.g. 1024)")
    parser.add_argument("--baseline", metavar="REV", help="run the browser half on the app of git revision REV too")
    parser.add_argument("--no-pages", action="store_true", help="skip opening every page (the switches only)")
    parser.add_argument("--no-cold-pages", action="store_true", help="skip the cold new-tab opens (the sidebar's only)")
    parser.add_argument("--pages", nargs="+", choices=PAGES, metavar="PAGE",
                        help=f"open only these pages (default every one: {' '.join(PAGES)})")
    parser.add_argument("--cold-pages", nargs="+", choices=PAGES, metavar="PAGE",
                        help="open only these pages cold in a new tab (default: the pages opened)")
    args = parser.parse_args(argv)
    result = run(args.repeats, browser=not args.no_browser, long_tokens=args.long_tokens, baseline=args.baseline,
                 pages=not args.no_pages, cold_pages=not args.no_cold_pages, page_names=args.pages,
                 cold_names=args.cold_pages)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    server, browser = result["server"], result["browser"]
    print(f"load average {' '.join(f'{v:.1f}' for v in result['load_average'])} before, "
          f"{' '.join(f'{v:.1f}' for v in result['load_average_after'])} after")
    print(f"server (AppTest, page script): first run {server['first_run_s']} s · head switch "
          f"{server['head_switch_ms']} ms · layer switch {server['layer_switch_ms']} ms · new 64-token prompt "
          f"{server['prompt_64_s']} s")
    if browser:
        print(_browser_line("browser (chromium)", browser))
    if result.get("baseline"):
        print(_browser_line(f"baseline app {result['baseline']['revision']} (chromium)", result["baseline"]))
    for name, target in result["targets"].items():
        print(f"  {name}: {target['measured']} (target ≤ {target['target']}) {'met' if target['met'] else 'MISSED'}")
    if browser and browser.get("pages"):
        print("  " + _cold_line(browser["pages"]))
    return 0


def _cold_line(pages: dict) -> str:
    """The slowest cold new-tab open, split where its time goes: before the page's script starts (the
    HTTP fetch of Streamlit's bundle, its websocket, a new session), the script, after it (Streamlit's
    element chunks and the figures drawn by a page that has parsed nothing yet)."""
    name, opened = max(pages.items(), key=lambda item: item[1]["open_s"])
    start, end = opened["script_start_s"], opened["script_end_s"]
    return (f"cold new-tab open (a new context: empty HTTP cache, new session; not the target): slowest {name} "
            f"{opened['open_s']} s = {start} s before its script + {round(end - start, 3)} s script + "
            f"{round(opened['open_s'] - end, 3)} s after it")


if __name__ == "__main__":
    sys.exit(main())
