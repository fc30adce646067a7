"""The Block page's equation fits the page at 1440 px: the norm's definition (the equation's last part)
was cut off when the whole block was one line."""

from __future__ import annotations

import pytest

from tests.helpers.browser import ERROR, browser_available, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

WIDTH = """() => {
  const formula = document.querySelector('.katex-display');
  const main = document.querySelector("[data-testid='stMainBlockContainer']");
  const style = getComputedStyle(main);
  return {formula: formula.scrollWidth, text: formula.textContent,
          column: main.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)};
}"""  # scrollWidth: the formula's whole width, the part beyond its box (hidden) included


def test_the_block_equation_fits_a_1440_pixel_page(server, page):
    page.set_viewport_size({"width": 1440, "height": 900})  # the page fixture gives the viewport back
    page.goto(f"{server}/block")
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    measured = page.evaluate(WIDTH)
    assert "RMSNorm(v)" in measured["text"].replace(" ", "")
    assert measured["formula"] <= measured["column"], measured  # the whole formula within the page's column
