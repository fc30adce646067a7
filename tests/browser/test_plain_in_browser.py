"""In the real browser: text through ``widgets.plain`` renders as written in every kind of Markdown
Streamlit draws (no link, image or tag; GitHub's autolinks included, which remark-gfm finds after escapes
are undone), and the head maps' hover writes a token's "$&", "$$", "%{y}" or "<br>" as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.browser import IDLE, streamlit_server
from tests.helpers.hostile_text import HOSTILE_LINES

pytestmark = pytest.mark.browser

PROBE = Path(__file__).resolve().parents[1] / "helpers" / "plain_app"
CANVAS_HEATMAP = Path(__file__).resolve().parents[2] / "app" / "components" / "head_maps" / "canvas_heatmap.js"
BIDI = {"\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"}


def test_plain_text_makes_no_link_image_or_tag_in_the_browser(page, tmp_path):
    artifacts = tmp_path
    with streamlit_server(app_root=PROBE) as url:
        page.goto(url)
        page.wait_for_selector(IDLE, timeout=60_000)
        page.wait_for_selector("[data-testid='stMetric']", timeout=60_000)
        page.screenshot(path=str(artifacts / "plain_in_browser.png"), full_page=True)
        main = page.locator("[data-testid='stMain']")
        assert main.locator("a, img, b, em, strong, code, .katex").count() == 0, main.inner_html()[:2000]
        shown = [text.replace("\u2060", "") for text in main.locator("[data-testid='stMarkdownContainer']").all_inner_texts()]
    for line in HOSTILE_LINES:
        written = "".join(f"\\u{ord(c):04x}" if c in BIDI else c for c in line)
        assert shown.count(written) >= 7, (written, shown)  # markdown, caption, 3 alerts, expander, metric...


def test_head_map_hover_writes_a_token_as_written(page):
    page.goto("about:blank")
    page.add_script_tag(content=CANVAS_HEATMAP.read_text(encoding="utf-8"))
    template = "query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"
    lines = page.evaluate("([t, x, y]) => hoverText(t, x, y, 0.25)", [template, "3:$&$$%{y}<br>$'", "1:$`"])
    assert lines == ["query 1:$`", "key 3:$&$$%{y}<br>$'", "weight 0.2500"]
