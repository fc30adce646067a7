"""What is drawn fits its place at 1440 px: the Block page's equation (the norm's definition, its last
part, was cut off when the whole block was one line), and every chart title and legend of the MoE page's
routing tab on the zoo's moe_top2 (the expert map's title ran past its column)."""

from __future__ import annotations

import pytest

from urllib.parse import quote

from app.services.zoo import zoo_path
from tests.helpers.browser import CHART, ERROR, browser_available, wait_idle, wait_until_drawn

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

WIDTH = """async () => {
  const formula = document.querySelector('.katex-display');
  formula.scrollWidth;  // laid out: the fonts it uses are asked for
  await document.fonts.ready;  // measured in KaTeX's own fonts, which the browser loads after the run
  const main = document.querySelector("[data-testid='stMainBlockContainer']");
  const style = getComputedStyle(main);
  return {formula: formula.scrollWidth, text: formula.textContent, fonts: document.fonts.status,
          column: main.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)};
}"""  # scrollWidth: the formula's whole width, the part beyond its box (hidden) included


def test_the_block_equation_fits_a_1440_pixel_page(server, page):
    page.set_viewport_size({"width": 1440, "height": 900})  # the page fixture gives the viewport back
    page.goto(f"{server}/block")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    page.wait_for_selector(".katex-display", timeout=30_000)
    measured = page.evaluate(WIDTH)
    assert "RMSNorm(v)" in measured["text"].replace(" ", "")
    assert measured["formula"] <= measured["column"], measured  # the whole formula within the page's column


OUTSIDE = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(plot => {
  const box = plot.querySelector('.main-svg').getBoundingClientRect();
  return [...plot.querySelectorAll('.gtitle, .legend, .annotation')].map(part => {
    const r = part.getBoundingClientRect();
    return {text: part.textContent.slice(0, 60), left: r.left - box.left, right: box.right - r.right};
  }).filter(part => part.left < -1 || part.right < -1);
})"""  # the titles, legends and labels that reach past their chart's own box


COUNTS = """() => { const plots = [...document.querySelectorAll("[data-testid='stPlotlyChart']")];
  return [plots.length, plots.filter((plot) => plot.querySelector('.js-plotly-plot .main-svg')).length]; }"""


def test_the_moe_routing_charts_titles_and_legends_fit_their_columns(server, page):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{server}/moe?model={quote(str(zoo_path('moe_top2')))}")
    page.wait_for_selector(f".st-key-moe_load_text {CHART}", timeout=120_000)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    # plotly draws each chart in the browser once it is in the page, after the run: every chart of the
    # tab drawn, or one still to come would be left out of the check
    wait_until_drawn(page, f"() => {{ const [n, drawn] = ({COUNTS})(); return n > 0 && drawn === n; }}", seen=COUNTS,
                     what="every plotly chart of the page drawn ([charts, drawn])")
    assert page.evaluate(OUTSIDE) == []
