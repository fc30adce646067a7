"""The real app in a real browser: type a prompt, see the heatmap, switch heads, rank coreference heads.

Runs ``streamlit run app/main.py`` and Debian's chromium through playwright. Screenshots go to
``TXVIZ_ARTIFACTS`` (default: the test's tmp dir); the time from Enter to the redrawn heatmap is printed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.browser import CHART, ERROR, browser_available, chromium_page, streamlit_server, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def server(default_model_home):
    with streamlit_server(env={"TXVIZ_HOME": str(default_model_home)}) as url:
        yield url


def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TXVIZ_ARTIFACTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def heatmap_text(page) -> str:
    return page.locator(".st-key-heatmap").inner_text()


def test_attention_page_type_prompt_switch_head(server, tmp_path):
    with chromium_page() as page:
        page.goto(server)
        page.wait_for_selector(f".st-key-heatmap {CHART}", timeout=180_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0

        prompt = page.locator(".st-key-prompt textarea")
        prompt.fill("Alice thanked Bob because she had finished the report.")
        started = time.perf_counter()
        prompt.press("Control+Enter")
        page.wait_for_function("() => document.querySelector('.st-key-heatmap')?.innerText.includes('Alice')",
                               timeout=60_000)
        page.wait_for_selector(f".st-key-heatmap {CHART}")
        seconds = time.perf_counter() - started
        wait_idle(page)
        print(f"\nEnter → heatmap drawn: {seconds:.2f} s")
        assert page.locator(ERROR).count() == 0
        assert "prompt=" in page.url  # the view is in the URL

        head = page.locator(".st-key-head input")
        head.fill("4")
        head.press("Enter")
        page.wait_for_function("() => document.querySelector('.st-key-heatmap')?.innerText.includes('head 4')",
                               timeout=60_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0
        assert "head=4" in page.url
        page.screenshot(path=str(artifacts(tmp_path) / "attention.png"), full_page=False)


def test_heads_page_coreference_ranking(server, tmp_path):
    with chromium_page() as page:
        page.goto(f"{server}/heads")
        wait_idle(page)
        page.get_by_role("tab", name="Coreference").click()
        sentence = page.locator(".st-key-coref_text input")
        sentence.fill("Anna called Peter because she needed help.")
        sentence.press("Enter")
        page.wait_for_function("() => document.body.innerText.includes('from she on Anna')", timeout=60_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0
        text = page.locator("[data-testid='stMainBlockContainer']").inner_text()
        assert "Best heads first" in text
        page.wait_for_selector(f".st-key-coref_grid {CHART}")
        page.locator(".st-key-coref_grid").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts(tmp_path) / "coreference.png"), full_page=False)


def test_positions_and_kv_pages_with_the_mha_toggle(server, tmp_path):
    with chromium_page() as page:
        page.goto(f"{server}/positions")
        page.wait_for_selector(f".st-key-rope_relative {CHART}", timeout=120_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0

        page.goto(f"{server}/kv-cache")
        page.wait_for_selector(f".st-key-kv_growth {CHART}", timeout=180_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0
        page.get_by_role("tab", name="MHA / GQA / MQA").click()
        page.wait_for_selector(f".st-key-mem_context {CHART}")
        before = page.locator("[data-testid='stMetric']").all_inner_texts()
        page.locator(".st-key-live_kv button", has_text="MHA").click()
        page.wait_for_function("() => [...document.querySelectorAll(\"[data-testid='stMetric']\")]"
                               ".some(m => m.innerText.includes('+200%'))", timeout=180_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0
        after = page.locator("[data-testid='stMetric']").all_inner_texts()
        assert before != after
        page.locator(".st-key-live_kv").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts(tmp_path) / "kv_mha.png"), full_page=False)


def test_moe_and_tradeoffs_pages(server, tmp_path):
    with chromium_page() as page:
        page.goto(f"{server}/moe")
        wait_idle(page)
        assert page.locator(ERROR).count() == 0
        page.get_by_role("tab", name="Capacity vs compute").click()
        page.wait_for_selector(f".st-key-moe_family {CHART}", timeout=120_000)
        if page.locator(".st-key-moe_map").count():  # a MoE to route: the loaded model or the zoo's
            page.get_by_role("tab", name="Routing on a text").click()
            page.wait_for_selector(f".st-key-moe_map {CHART}", timeout=60_000)
            page.locator(".st-key-moe_map").scroll_into_view_if_needed()
            page.screenshot(path=str(artifacts(tmp_path) / "moe.png"), full_page=False)
        assert page.locator(ERROR).count() == 0

        page.goto(f"{server}/tradeoffs")
        page.wait_for_selector(f".st-key-to_depth_flops {CHART}", timeout=120_000)
        wait_idle(page)
        page.get_by_role("tab", name="Context length").click()
        page.wait_for_selector(f".st-key-to_ctx_flops {CHART}", timeout=60_000)
        assert "2,304" in page.locator("[data-testid='stMainBlockContainer']").inner_text()  # SmolLM2's T*
        assert page.locator(ERROR).count() == 0
        page.locator(".st-key-to_ctx_flops").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts(tmp_path) / "tradeoffs.png"), full_page=False)


def test_a_long_prompt_is_drawn_pooled_with_an_exact_region(server, tmp_path):
    """About 2000 tokens pasted (past TXVIZ_MAX_TOKENS): the page says what it keeps, draws the map pooled,
    and the region box shows exact weights of the rows asked for."""
    text = (Path(__file__).resolve().parents[1] / "assets" / "texts" / "how_a_model_reads.txt").read_text()
    with chromium_page() as page:
        page.goto(server)
        page.wait_for_selector(f".st-key-heatmap {CHART}", timeout=180_000)
        wait_idle(page)
        prompt = page.locator(".st-key-prompt textarea")
        prompt.fill((text + "\n") * 2)
        started = time.perf_counter()
        prompt.press("Control+Enter")
        page.wait_for_function("() => document.body.innerText.includes('A long prompt: cost-aware capture')",
                               timeout=300_000)
        page.wait_for_selector(f".st-key-heatmap_region {CHART}", timeout=120_000)
        wait_idle(page, timeout_ms=300_000)
        seconds = time.perf_counter() - started
        body = page.locator("[data-testid='stMainBlockContainer']").inner_text()
        assert page.locator(ERROR).count() == 0
        assert "Keeping every map would take" in body and "the largest weight in each 8 × 8 block" in body
        title = page.locator(".st-key-heatmap").inner_text()
        assert "each cell = 8×8 tokens" in title
        region = page.locator(".st-key-region_query input")
        region.fill("100")
        region.press("Enter")
        page.wait_for_function("() => document.querySelector('.st-key-heatmap_region')?.innerText"
                               ".includes('queries 100–163')", timeout=60_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0
        print(f"\n~2000-token prompt → pooled map and region drawn: {seconds:.1f} s")
        page.locator(".st-key-heatmap").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts(tmp_path) / "attention_long.png"), full_page=False)


def test_a_click_on_the_head_grid_opens_that_head(server, tmp_path):
    with chromium_page() as page:
        page.goto(server)
        page.wait_for_selector(f".st-key-heatmap {CHART}", timeout=180_000)
        wait_idle(page)
        grid = ".st-key-head_grid .js-plotly-plot"
        index = 5 * 9 + 4  # layer-major squares (tests/test_charts.py): layer 5, head 4 of SmolLM2's 9
        square = page.locator(f"{grid} .scatterlayer .trace").first.locator(".point").nth(index)
        square.scroll_into_view_if_needed()
        box = square.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x - 4, y - 4)
        page.mouse.move(x, y)  # plotly picks the point under a hover, then the click selects it
        page.mouse.click(x, y)
        page.wait_for_function("() => document.querySelector('.st-key-heatmap')?.innerText.includes('Layer 5, head 4')",
                               timeout=60_000)
        wait_idle(page)
        assert page.locator(ERROR).count() == 0
        assert "layer=5" in page.url and "head=4" in page.url  # the link follows the click
        assert page.locator(".st-key-head input").input_value() == "4"
