"""The head table component in a real browser (app/components/head_table): every head's row, "—" where
a metric is undefined, a click on a header sorting by that column (a second click: the other way,
undefined last both ways) with no Streamlit rerun, each metric's help text on its header, the rows in
the DOM being those in view of the sorted table (at the top, and after a scroll to the bottom), and a new
prompt rewriting the rows in place while the sort stays."""

from __future__ import annotations

import pytest

from tests.helpers.browser import ERROR, browser_available, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

ROOT = ".st-key-head_table .txviz-head-table"
READ = """root => ({
  headers: [...root.querySelectorAll('th')].map(th => [th.textContent, th.title, th.getAttribute('aria-sort')]),
  rows: root.txvizShown(),  // every row, sorted, as the cells show them
  drawn: [...root.querySelectorAll('tbody tr:not(.spacer)')].map(tr => [...tr.children].map(td => td.textContent)),
  first: Number(root.dataset.firstRow),
  painted: root.dataset.painted,
})"""
PROMPT = "A red cat and a red cat"  # " red cat" repeats: the induction column has values; a prompt with no repeat has none


def read(page) -> dict:
    """The table's rows; checks that the rows in the DOM are the sorted rows from its first drawn one."""
    table = page.locator(ROOT).evaluate(READ)
    assert 0 < len(table["drawn"]) < len(table["rows"])  # only a window of the rows is laid out
    assert table["drawn"] == table["rows"][table["first"]:table["first"] + len(table["drawn"])]
    return table


def a_scroll_to_the_bottom_draws_the_last_rows(page) -> None:
    page.locator(ROOT).evaluate("root => { root.scrollTop = root.scrollHeight; }")
    page.wait_for_function("sel => Number(document.querySelector(sel).dataset.firstRow) > 0", arg=ROOT)
    table = read(page)
    assert table["drawn"][-1] == table["rows"][-1]
    box = page.locator(ROOT).bounding_box()
    last = page.locator(f"{ROOT} tbody tr:not(.spacer)").last.bounding_box()
    assert box["y"] < last["y"] and last["y"] + last["height"] <= box["y"] + box["height"] + 1  # in view
    page.locator(ROOT).evaluate("root => { root.scrollTop = 0; }")


def number(text: str) -> float:
    return float("nan") if text == "—" else float(text)


def column(table: dict, name: str) -> list[str]:
    index = [h[0] for h in table["headers"]].index(name)
    return [row[index] for row in table["rows"]]


def test_a_click_on_a_header_sorts_the_heads_with_no_rerun(server, page, default_model):
    config = default_model.config
    page.goto(f"{server}/attention?prompt=One%20two%20three.")  # nothing repeats: induction is undefined
    page.wait_for_selector(f"{ROOT}[data-painted]", timeout=180_000)
    wait_idle(page)
    table = read(page)
    names = [h[0] for h in table["headers"]]
    assert names[:2] == ["layer", "head"] and "entropy" in names and "induction" in names
    assert len(table["rows"]) == config.n_layers * config.n_heads
    assert set(column(table, "induction")) == {"—"} and "—" not in column(table, "entropy")
    helps = {h[0]: h[1] for h in table["headers"]}
    assert "induction heads" in helps["induction"] and "no token of this prompt repeats" in helps["induction"]
    assert "spread of the weights" in helps["entropy"]

    runs = page.evaluate("() => window.__txvizRuns?.asked")
    header = page.locator(f"{ROOT} th", has_text="entropy")
    header.click()
    ascending = [number(v) for v in column(read(page), "entropy")]
    assert ascending == sorted(ascending) and ascending[0] < ascending[-1]
    assert read(page)["headers"][names.index("entropy")][2] == "ascending"
    header.click()
    descending = [number(v) for v in column(read(page), "entropy")]
    assert descending == sorted(ascending, reverse=True)
    a_scroll_to_the_bottom_draws_the_last_rows(page)
    assert page.evaluate("() => window.__txvizRuns?.asked") == runs  # sorted in the browser: nothing ran

    page.locator(".st-key-prompt textarea").fill(PROMPT)  # a new prompt: new rows, the sort kept
    page.locator(".st-key-prompt textarea").press("Control+Enter")
    page.wait_for_function("([sel, n]) => document.querySelector(sel).dataset.painted !== n",
                           arg=[ROOT, read(page)["painted"]], timeout=120_000)
    wait_idle(page)
    table = read(page)
    entropy = [number(v) for v in column(table, "entropy")]
    assert entropy == sorted(entropy, reverse=True) and entropy != descending
    induction = [number(v) for v in column(table, "induction")]
    assert any(v == v for v in induction)
    page.locator(f"{ROOT} th", has_text="induction").click()
    induction = [number(v) for v in column(read(page), "induction")]
    defined = [v for v in induction if v == v]
    assert defined == sorted(defined) and all(v != v for v in induction[len(defined):])  # undefined last
    assert page.locator(ERROR).count() == 0
