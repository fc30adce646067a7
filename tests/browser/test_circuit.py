"""The Heads page's Circuit tab in a real browser, on the zoo's tiny base_long (word-level vocabulary: the
names are single tokens; its circuit runs in about 2 s): the graph draws after the click, moving the edge
slider changes the measured faithfulness beside it (all edges clean measures 1, as the curve says), a click
on a head's node in the graph chooses that head for the query–key breakdown, a new prompt pair shows no
graph until it is run (and its own after), and the head's button opens it on the Attention page with the
clean prompt. Screenshots go to ``TXVIZ_ARTIFACTS``."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from app.services.zoo import zoo_path
from tests.helpers.browser import (CHART, ERROR, POLL_MS, artifacts, browser_available, rerun_mark, wait_idle,
                                  wait_page_head, wait_until_drawn)

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

CLEAN = "Mary gave the book to John. John gave it back to"
CORRUPT = "Mary gave the book to John. Mary gave it back to"
OTHER_CORRUPT = "Mary gave the book to John. John gave it back from"
GRAPH = "[class*='st-key-circuit_graph_']"
EDGES = "[class*='st-key-circuit_edges_'] input[type=range]"
# the graph's head nodes as drawn: their names and their centres on the page
HEAD_NODES = """(selector) => {
  const plot = document.querySelector(selector + ' .js-plotly-plot');
  const nodes = plot.data.find((t) => t.name === 'nodes'), layout = plot._fullLayout;
  const box = plot.getBoundingClientRect();
  return nodes.customdata.map((name, i) => ({name, x: box.left + layout._size.l + layout.xaxis.d2p(nodes.x[i]),
                                             y: box.top + layout._size.t + layout.yaxis.d2p(nodes.y[i])}))
    .filter((node) => /^a\\d+\\.h\\d+$/.test(node.name));
}"""
STAR = """() => (document.querySelector("[class*='st-key-circuit_curve_'] .js-plotly-plot")?.data ?? [])
  .filter((t) => t.name === 'chosen circuit').map((t) => [t.x[0], t.y[0]])[0] ?? []"""  # the curve's star
SEGMENTS = """(selector) => (document.querySelector(selector + ' .js-plotly-plot')?.data ?? [])
  .filter((t) => t.mode === 'lines').reduce((n, t) => n + t.x.filter((x) => x === null).length, 0)"""


def measured(page) -> float:
    box = page.locator("[data-testid='stMetric']").filter(has_text="Measured faithfulness").first
    return float(box.locator("[data-testid='stMetricValue']").inner_text().replace("−", "-"))


def graph_keys(page) -> list[str]:
    return page.evaluate("() => [...document.querySelectorAll(\"[class*='st-key-circuit_graph_']\")]"
                         ".map((e) => [...e.classList].find((c) => c.startsWith('st-key-circuit_graph_')))")


def enter(page, name: str, text: str) -> None:
    """Type ``text`` (a new value: it asks a rerun) into a text box and wait for that rerun's end."""
    box = page.locator(f".st-key-circuit_{name} input")
    mark = rerun_mark(page)
    box.fill(text)
    box.press("Enter")
    wait_idle(page, since=mark)


def wait_one_graph(page) -> None:
    """Wait until the page holds one graph, drawn by the run that ended: the run's end reaches the test a
    moment before the browser takes out the last run's element (still in the page, marked stale), and a
    locator that found that one would lose it."""
    page.wait_for_function("(s) => { const g = document.querySelectorAll(s); "
                           "return g.length === 1 && g[0].dataset.stale !== 'true'; }",
                           arg=GRAPH, polling=POLL_MS, timeout=30_000)


def run_circuit(page) -> str:
    """Click the run button; the key of the graph it draws."""
    page.locator(".st-key-circuit_run button").click()
    page.wait_for_selector(f"{GRAPH} {CHART}", timeout=120_000)
    wait_idle(page)
    wait_one_graph(page)
    assert page.locator(ERROR).count() == 0
    [key] = graph_keys(page)
    return key


def move_slider(page, key: str) -> tuple[int, float]:
    """Press ``key`` on the edge slider; (the edges it shows, the measured faithfulness), once the run is done."""
    slider = page.locator(EDGES)
    before, mark = slider.get_attribute("aria-valuetext"), rerun_mark(page)
    slider.focus()
    slider.press(key)
    page.wait_for_function("([s, v]) => document.querySelector(s).getAttribute('aria-valuetext') !== v",
                           arg=[EDGES, before], polling=POLL_MS)
    wait_idle(page, since=mark)  # the slider shows its value at once and asks for its rerun a moment later
    wait_one_graph(page)
    return int(slider.get_attribute("aria-valuetext").replace(",", "")), measured(page)


def wait_graph_of(page, edges: int) -> None:
    """Wait until plotly has drawn the graph of a circuit of ``edges`` edges (one segment per edge drawn, at
    most the page's MAX_DRAWN): plotly redraws the graph in the browser after the run that sent it has
    ended, and until then the graph holds the last run's edges and nodes."""
    from app.app_pages.heads.circuit_graph import MAX_DRAWN

    drawn = min(edges, MAX_DRAWN)
    wait_until_drawn(page, f"([s, n]) => ({SEGMENTS})(s) === n", [GRAPH, drawn], seen=f"([s]) => ({SEGMENTS})(s)",
                     what=f"the graph drawn with {drawn} edges, the circuit of {edges}")


def test_the_circuit_draws_measures_opens_a_head_and_forgets_nothing_of_the_old_pair(server, page, tmp_path):
    times, started = {}, time.perf_counter()
    page.goto(f"{server}/heads?model={quote(str(zoo_path('base_long')))}")
    wait_idle(page, timeout_ms=180_000)
    page.get_by_role("tab", name="Circuit").click()
    wait_idle(page)
    for name, text in (("clean", CLEAN), ("corrupt", CORRUPT), ("answer", "Mary"), ("wrong", "John")):
        enter(page, name, text)
    assert page.locator(f"{GRAPH}").count() == 0  # nothing runs before the click
    times["open and fill"] = time.perf_counter() - started

    started = time.perf_counter()
    first = run_circuit(page)
    times["run"] = time.perf_counter() - started

    started = time.perf_counter()
    everything, at_all = move_slider(page, "End")
    assert at_all == pytest.approx(1.0, abs=1e-3)  # every edge clean is the clean run
    one, at_one = move_slider(page, "Home")
    assert one == 1
    page.wait_for_function(f"(s) => ({SEGMENTS})(s) === 1", arg=GRAPH, polling=POLL_MS, timeout=30_000)  # redrawn: one edge
    assert at_one != pytest.approx(at_all, abs=1e-3)  # the slider re-measured: one edge is not all of them
    # the curve is drawn below the graph, by the same run: its star moved to one edge once it is redrawn
    page.wait_for_function(f"() => ({STAR})()[0] === 1", polling=POLL_MS, timeout=30_000)
    curve = page.evaluate(STAR)
    assert curve == pytest.approx([1, at_one], abs=1e-3)  # the curve's star is the circuit measured beside it
    times["slider"] = time.perf_counter() - started
    page.locator(GRAPH).scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "circuit_one_edge.png"), full_page=False)

    wait_graph_of(page, move_slider(page, "End")[0])  # every node of the circuit in the graph, where it is drawn
    started = time.perf_counter()
    page.locator(GRAPH).scroll_into_view_if_needed()
    heads = page.evaluate(HEAD_NODES, GRAPH)
    layer_box = page.locator("[class*='st-key-circuit_layer_'] input")
    head_box = page.locator("[class*='st-key-circuit_head_'] input")
    target = next(h for h in reversed(heads) if (h["name"][1:].split(".h")[0], h["name"].split(".h")[1])
                  != (layer_box.input_value(), head_box.input_value()))
    layer, head = map(int, target["name"][1:].split(".h"))
    page.mouse.click(target["x"], target["y"])
    page.wait_for_function("([l, h]) => document.querySelector(\"[class*='st-key-circuit_layer_'] input\").value === l"
                           " && document.querySelector(\"[class*='st-key-circuit_head_'] input\").value === h",
                           arg=[str(layer), str(head)], polling=POLL_MS, timeout=60_000)
    wait_idle(page)
    page.wait_for_function("t => [...document.querySelectorAll('.gtitle')].some((g) => g.textContent === t)",
                           arg=f"L{layer} H{head}: query side × key side", polling=POLL_MS, timeout=60_000)
    assert page.locator(ERROR).count() == 0
    times["click a head"] = time.perf_counter() - started
    page.locator("[class*='st-key-circuit_qk_']").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "circuit_head_breakdown.png"), full_page=False)

    started = time.perf_counter()
    enter(page, "corrupt", OTHER_CORRUPT)
    page.wait_for_function("(s) => document.querySelectorAll(s).length === 0", arg=GRAPH,  # the old one taken out
                           polling=POLL_MS, timeout=30_000)
    assert page.locator("[data-testid='stMetric']").filter(
        has_text="Measured faithfulness").count() == 0
    assert page.locator(".st-key-circuit_run button").count() == 1  # asks to run the new pair instead
    second = run_circuit(page)
    assert second != first
    enter(page, "corrupt", CORRUPT)
    wait_one_graph(page)
    assert graph_keys(page) == [first]  # the first pair's run, kept for it
    times["new pair"] = time.perf_counter() - started

    started = time.perf_counter()
    page.locator(f"[class*='st-key-circuit_layer_'] input").fill(str(layer))
    page.locator(f"[class*='st-key-circuit_layer_'] input").press("Enter")
    wait_idle(page)
    page.locator(f"[class*='st-key-circuit_head_'] input").fill(str(head))
    page.locator(f"[class*='st-key-circuit_head_'] input").press("Enter")
    wait_idle(page)
    page.get_by_role("button", name=f"Open L{layer} H{head} in the Attention page").click()
    page.wait_for_url("**/attention*", timeout=60_000)
    wait_page_head(page, layer, head)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    assert page.locator("[data-testid='stSidebar'] textarea").first.input_value() == CLEAN
    times["open on the Attention page"] = time.perf_counter() - started
    page.screenshot(path=str(artifacts(tmp_path) / "circuit_head_on_attention.png"), full_page=False)
    print("\n" + ", ".join(f"{step}: {seconds:.2f} s" for step, seconds in times.items()))
