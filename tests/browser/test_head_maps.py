"""The head maps component in a real browser: a click on a head, or an arrow key (another head, another
layer: at 64 tokens every layer is in the page), repaints the map with that head's weights — the same
numbers as the model's own maps — with no Streamlit rerun and nothing sent to the server up to the
paint; then the component sends the head back and the page follows it (the grid's highlight, the head
view, the link), so the page never shows two heads at once; the map's bar and layer slider are the
page's one control (no Layer slider or Head box of the page's beside them). The hover names the query
token, the key token and the weight. On a prompt whose layers do not all fit one blob, the painted
layer's neighbours (±1, ±2) are prefetched one request at a time without moving the page's head, so ↓ to
a neighbour paints with nothing sent (a new prompt restarts the prefetch on its own layers); a layer the
browser lacks comes with the page's rerun for the pick, and a layer fetched once is switched back to with
nothing sent up to its paint.

The time from click to the repainted map is printed; run with ``-s`` to see it."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import torch

from tests.helpers.browser import ERROR, browser_available, wait_idle, wait_page_head

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

ROOT = ".st-key-heatmap .txviz-head-maps"
WATCH_RERUNS = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  window.txvizReruns = 0;
  new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.txvizReruns += 1;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""
CELLS = [(5, 0), (9, 3), (12, 11), (14, 14), (14, 7)]  # (query, key), inside the causal triangle
READ_CELLS = """cells => {  // the values the canvas drew (app/components/head_maps/canvas_heatmap.js)
  const plot = document.querySelector('.txviz-head-plot');
  return cells.map(([q, k]) => plot.txvizCell(q, k));
}"""

POSITION_OF = """([query, key]) => document.querySelector('.txviz-head-plot').txvizCellCenter(query, key)"""


def model_layer(default_model, layer: int) -> tuple[np.ndarray, list[str]]:
    """(heads, T, T) of the default prompt's layer, from a trace run here, and its tokens."""
    from app.ui.state import DEFAULT_PROMPT

    return model_layer_of(default_model, DEFAULT_PROMPT, layer)


def model_layer_of(default_model, prompt: str, layer: int) -> tuple[np.ndarray, list[str]]:
    """(heads, T, T) of ``prompt``'s layer, from a trace run here, and its tokens."""
    maps, tokens = model_maps_of(default_model, prompt)
    return maps[layer], tokens


_TRACED: dict = {}  # (model, prompt) -> every layer's maps: a test reads several layers of one prompt


def model_maps_of(default_model, prompt: str) -> tuple[np.ndarray, list[str]]:
    """(layers, heads, T, T) of ``prompt`` from one trace run here (a trace captures every layer), and its tokens."""
    from txviz.capture.trace import trace

    key = (id(default_model), prompt)
    if key not in _TRACED:
        encoding = default_model.tokenizer.encode(prompt, bos="sink")
        tr = trace(default_model.model, torch.tensor(encoding.ids), capture=("attn_probs",))
        config = default_model.config
        maps = np.stack([[tr.attn(layer, h).numpy() for h in range(config.n_heads)]
                         for layer in range(config.n_layers)])
        _TRACED.clear()  # one prompt at a time: the tests read one prompt's layers, then move on
        _TRACED[key] = (maps, encoding.tokens)
    return _TRACED[key]


def painted_head(page) -> int:
    return int(page.locator(ROOT).get_attribute("data-head"))


def test_the_hover_then_a_head_switch_paints_before_anything_is_sent_and_the_page_follows(
        server, page, default_model):
    """One session on layer 3 of the default prompt: one control of the layer and head, the hover over a
    cell, then head and layer switches that repaint in the browser with nothing sent up to the paint,
    each followed by the rest of the page."""
    page.goto(f"{server}/attention?layer=3")
    page.wait_for_selector(f"{ROOT}[data-painted]", timeout=180_000)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0 and painted_head(page) == 0
    wait_page_head(page, 3, 0)  # the map and the views below show one head
    assert page.locator(".st-key-layer").count() == 0 and page.locator(".st-key-head").count() == 0  # one control
    maps, _ = model_layer(default_model, 3)
    the_hover_names_query_key_and_weight(page, maps)
    page.evaluate(COUNT_SENDS)
    page.evaluate(WATCH_RERUNS)
    page.evaluate(WATCH_PAINTS)
    a_head_switch_repaints_in_the_browser_then_the_page_follows(page, default_model, maps)


def the_hover_names_query_key_and_weight(page, maps: np.ndarray) -> None:
    query_label, key_label = page.evaluate(
        "() => { const s = document.querySelector('.txviz-head-plot').txvizMap.spec; return [s.y[9], s.x[3]]; }")
    assert query_label.startswith("9:") and key_label.startswith("3:")
    x, y = page.evaluate(POSITION_OF, [9, 3])
    page.mouse.move(x, y)  # the reader's mouse over that cell
    hover = page.locator(".txviz-head-plot .hovertext").text_content()
    assert f"query {query_label}" in hover and f"key {key_label}" in hover
    weight = float(re.search(r"weight ≈([0-9.]+)", hover).group(1))  # said to be rounded: float16, 3 digits
    assert "float16" in hover and weight == pytest.approx(float(maps[0, 9, 3]), rel=5e-3, abs=1e-4)


def switched(page, act, layer: int, head: int) -> float:
    """``act`` (a click or a key), then the map painted with (layer, head) with no frame sent and no rerun
    started up to that paint (recorded at once by WATCH_PAINTS), then the page followed it. Seconds from
    the action to the paint."""
    sends, reruns = page.evaluate("window.txvizSends"), page.evaluate("window.txvizReruns")
    since = page.evaluate("window.txvizPaints.length")
    started = time.perf_counter()
    act()
    page.wait_for_selector(f"{ROOT}[data-layer='{layer}'][data-head='{head}']")
    seconds = time.perf_counter() - started
    painted = page.evaluate(FIRST_PAINT_OF, [since, layer, head])
    assert (painted["sends"], painted["reruns"]) == (sends, reruns), painted
    wait_page_head(page, layer, head, timeout_ms=60_000)  # then the pick went back and the page followed
    wait_idle(page)
    assert f"layer={layer}" in page.url and f"head={head}" in page.url and page.locator(ERROR).count() == 0
    assert page.evaluate("window.txvizSends") > sends  # the pick was sent, after the paint
    assert painted_head(page) == head and page.locator(ROOT).get_attribute("data-layer") == str(layer)  # it stayed
    return seconds


def a_head_switch_repaints_in_the_browser_then_the_page_follows(page, default_model, maps: np.ndarray) -> None:
    """Layer 3, head 0 → head 4 (a click) → head 5 (→) → layer 4 (↓), each the model's numbers."""
    seconds = switched(page, lambda: page.locator(".txviz-head-bar button[data-head='4']").click(), 3, 4)
    print(f"\nclick on a head → map repainted in the browser: {seconds * 1000:.0f} ms "
          f"({page.locator(ROOT).get_attribute('data-switch-ms')} ms event → painted, measured by the page)")
    np.testing.assert_allclose(page.evaluate(READ_CELLS, CELLS), [maps[4, q, k] for q, k in CELLS],
                               rtol=1e-3, atol=1e-4)  # float16 on the way, the model's numbers
    assert not np.allclose([maps[0, q, k] for q, k in CELLS], [maps[4, q, k] for q, k in CELLS], atol=1e-3)
    assert "Layer 3, head 4" in page.locator(f"{ROOT} .gtitle").text_content()
    assert page.locator(".txviz-head-bar button[data-head='4']").get_attribute("aria-pressed") == "true"

    switched(page, lambda: page.locator(ROOT).press("ArrowRight"), 3, 5)  # the keyboard: the next head
    np.testing.assert_allclose(page.evaluate(READ_CELLS, CELLS), [maps[5, q, k] for q, k in CELLS],
                               rtol=1e-3, atol=1e-4)
    switched(page, lambda: page.locator(ROOT).press("ArrowDown"), 4, 5)  # the next layer: every layer is here
    below, _ = model_layer(default_model, 4)
    np.testing.assert_allclose(page.evaluate(READ_CELLS, CELLS), [below[5, q, k] for q, k in CELLS],
                               rtol=1e-3, atol=1e-4)
    assert "Layer 4, head 5" in page.locator(f"{ROOT} .gtitle").text_content()
    a_reader_pressing_keys_sends_the_head_they_stop_on(page)


def a_reader_pressing_keys_sends_the_head_they_stop_on(page) -> None:
    """Four keys in quick succession: the page ends on the last head (one pick when the keys come quicker than
    the component's pause), and the map never jumps back to a head passed while the page catches up."""
    picks = int(page.locator(ROOT).get_attribute("data-picks"))
    page.evaluate("""() => {
      const root = document.querySelector('.st-key-heatmap .txviz-head-maps');
      window.txvizPainted = [];
      new MutationObserver(() => window.txvizPainted.push(`${root.dataset.layer}:${root.dataset.head}`))
        .observe(root, {attributes: true, attributeFilter: ['data-painted']});
    }""")
    for key in ("ArrowRight", "ArrowRight", "ArrowUp", "ArrowLeft"):
        page.locator(ROOT).press(key)
    wait_page_head(page, 3, 6, timeout_ms=60_000)
    wait_idle(page)
    page.wait_for_timeout(500)  # a late pick, had one been sent, would show by now
    wait_idle(page)
    sent = int(page.locator(ROOT).get_attribute("data-picks")) - picks
    print(f"\n4 keys in a row → {sent} pick(s) sent")  # one when the keys come within PICK_AFTER_MS
    assert 1 <= sent <= 4 and "layer=3" in page.url and "head=6" in page.url
    painted = page.evaluate("window.txvizPainted")  # a pick the page follows late never moves the map back
    assert painted[:4] == ["4:6", "4:7", "3:7", "3:6"] and set(painted[4:]) <= {"3:6"}, painted


def long_prompt(tokenizer, n_tokens: int) -> str:
    """A prompt of exactly ``n_tokens`` tokens with the sink (the benchmark's own text)."""
    from tests.helpers.bench_app import TEXT

    encoding = tokenizer.encode(TEXT, bos="sink")
    prompt = TEXT[:encoding.offsets[n_tokens - 1][1]]
    assert len(tokenizer.encode(prompt, bos="sink").ids) == n_tokens
    return prompt


WATCH_ASKS = """() => {  // a request for a layer made while another was still on its way: a pile-up
  const root = document.querySelector(".st-key-heatmap .txviz-head-maps");
  window.txvizPiledUp = 0;
  new MutationObserver((records) => records.forEach((r) => {
    if (r.oldValue !== null && root.dataset.asked !== undefined) window.txvizPiledUp += 1;
  })).observe(root, {attributes: true, attributeOldValue: true, attributeFilter: ['data-asked']});
}"""
COUNT_SENDS = """(() => {  // every frame the page sends the server from now on, counted in the page
  const send = WebSocket.prototype.send;
  window.txvizSends = 0;
  WebSocket.prototype.send = function (...args) { window.txvizSends += 1; return send.apply(this, args); };
})()"""
WATCH_PAINTS = """() => {  // at each paint, at once (before any prefetch can start): frames sent, requests made
  const root = document.querySelector(".st-key-heatmap .txviz-head-maps");
  window.txvizPaints = [];
  new MutationObserver(() => window.txvizPaints.push({layer: root.dataset.layer, head: root.dataset.head,
    sends: window.txvizSends, fetches: root.dataset.fetches, reruns: window.txvizReruns})).observe(
    root, {attributes: true, attributeFilter: ['data-painted']});
}"""
FIRST_PAINT_OF = """([since, layer, head]) => window.txvizPaints.slice(since)
  .find((paint) => paint.layer === String(layer) && paint.head === String(head))"""


def held_layers(page) -> list[int]:
    return [int(layer) for layer in page.locator(ROOT).get_attribute("data-layers").split(",")]


def pick_layer(page, layer: int) -> None:
    """The component's own layer slider moved to ``layer`` (a jump, as a drag of its thumb would)."""
    page.locator(f"{ROOT} .txviz-layer input").evaluate(
        "(slider, layer) => { slider.value = String(layer); slider.dispatchEvent(new Event('input')); }", layer)


def open_long_prompt(page, server, prompt: str, layer: int) -> None:
    from urllib.parse import quote

    page.goto(f"{server}/attention?layer={layer}&prompt={quote(prompt)}")
    page.wait_for_selector(f"{ROOT}[data-painted][data-layer='{layer}']", timeout=180_000)
    page.evaluate(COUNT_SENDS)  # after the load: an init script would stay on the kept page for later tests


WATCH_FETCHES = """() => {  // every request for a layer: the prompt whose view asked it, and the layer
  const root = document.querySelector(".st-key-heatmap .txviz-head-maps");
  window.txvizFetched = [];  // the record comes at the end of the task that asked: its view is still the page's
  new MutationObserver((records) => records.forEach(() => window.txvizFetched.push(
    [root.txvizData.prompt_id, Number(root.dataset.asked)])))
    .observe(root, {attributes: true, attributeFilter: ['data-fetches']});
}"""
HELD_OF = "id => [...(window.__txvizHeadMaps.prompts.get(id) || new Map()).keys()].sort((a, b) => a - b)"


PREFETCH_STATE = """() => { const root = document.querySelector('.st-key-heatmap .txviz-head-maps');
  const app = document.querySelector("[data-testid='stApp']");
  return {dataset: {...root.dataset}, asked: root.txviz.asked, layer: root.txviz.layer,
          asker: typeof window.__txvizHeadMaps.ask, prompts: [...window.__txvizHeadMaps.prompts.keys()],
          script: app && app.getAttribute('data-test-script-state'), runs: window.__txvizRuns}; }"""


def prefetch_started(page, timeout_ms: int = 120_000) -> None:
    """Wait until the map has asked for a neighbour layer at least once; on a timeout, say what the map and
    the page were doing (the map's state, its asker, the script's state)."""
    try:
        page.wait_for_function(f"() => Number(document.querySelector('{ROOT}')?.dataset.fetches || 0) >= 1",
                               timeout=timeout_ms, polling=200)
    except Exception as error:
        raise AssertionError(f"no neighbour was asked for: {page.evaluate(PREFETCH_STATE)}") from error


def test_a_new_prompt_stops_the_old_prompts_prefetch_then_a_switch_to_a_prefetched_neighbour_sends_nothing_and_a_missing_layer_is_fetched_alone(
        server, page, default_model):
    """One session, one load of the page (a load costs chromium and the server about 2.5 CPU s): the prompt
    changes once the old prompt's prefetch has begun (most often while its neighbours are still on their
    way; a fast machine may have fetched them all by then): from the moment the new prompt's view is in
    the page, nothing more of the old prompt's comes, and the new one's neighbours are prefetched (±1 then
    ±2, one request per layer, none repeated) without moving the page's head. On the new prompt: ↓ to a
    prefetched neighbour paints with nothing sent, then the page follows; a far layer the browser lacks
    comes with the page's rerun for the pick; back to a layer it holds paints with nothing sent."""
    # 30 layers × 9 heads × 100² × 2 B = 5.4 MB: over the one-blob budget, so one layer per blob
    old, new = (long_prompt(default_model.tokenizer, n) for n in (100, 101))
    open_long_prompt(page, server, old, 3)
    page.evaluate(WATCH_ASKS)
    page.evaluate(WATCH_FETCHES)
    # the old prompt's first neighbour asked for: a count that stays (its request may already be answered)
    prefetch_started(page)
    old_id = page.locator(ROOT).evaluate("root => root.txvizData.prompt_id")
    box = page.locator(".st-key-prompt textarea")
    box.fill(new)
    box.press("Control+Enter")
    old_held = page.wait_for_function(  # the moment the new prompt's view arrives: what the old one had then
        "id => document.querySelector('.st-key-heatmap .txviz-head-maps')?.txvizData.prompt_id !== id"
        f" && ({HELD_OF})(id)", arg=old_id, timeout=180_000).json_value()
    # the new prompt's reach fetched, then quiet: the layers named, since the map says "done" also when a
    # prefetch timer of the old prompt's fires before the new prompt's first blob has come (nothing to
    # prefetch around a layer the browser lacks), and that blob comes after the run that sent its view
    page.wait_for_selector(f"{ROOT}[data-layers='1,2,3,4,5'][data-prefetch='done']", timeout=120_000)
    wait_idle(page)
    new_id = page.locator(ROOT).evaluate("root => root.txvizData.prompt_id")
    assert page.locator(ERROR).count() == 0 and page.evaluate("window.txvizPiledUp") == 0
    assert page.evaluate(HELD_OF, new_id) == [1, 2, 3, 4, 5]  # the new prompt's neighbours
    assert page.evaluate(HELD_OF, old_id) == old_held and 3 in old_held  # the old one's asked no more
    assert held_layers(page) == [1, 2, 3, 4, 5]
    asked = sorted(layer for prompt_id, layer in page.evaluate("window.txvizFetched") if prompt_id == new_id)
    assert asked == [1, 2, 4, 5], asked  # one request per layer, none repeated
    assert (painted_head(page), page.locator(ROOT).get_attribute("data-layer")) == (0, "3")  # the map stayed
    wait_page_head(page, 3, 0)  # so did the page
    page.evaluate(WATCH_RERUNS)
    page.evaluate(WATCH_PAINTS)
    a_switch_to_a_prefetched_neighbour_paints_with_nothing_sent(page, default_model, new)
    a_layer_the_browser_lacks_comes_with_the_pick(page, default_model, new)


def a_switch_to_a_prefetched_neighbour_paints_with_nothing_sent(page, default_model, prompt: str) -> None:
    sends, fetches = page.evaluate("window.txvizSends"), page.locator(ROOT).get_attribute("data-fetches")
    reruns, since = page.evaluate("window.txvizReruns"), page.evaluate("window.txvizPaints.length")
    started = time.perf_counter()
    page.locator(ROOT).press("ArrowDown")  # layer 4: prefetched
    page.wait_for_selector(f"{ROOT}[data-layer='4'][data-head='0']", timeout=10_000)
    print(f"\nprefetched layer switched to at 101 tokens: {(time.perf_counter() - started) * 1000:.0f} ms "
          f"({page.locator(ROOT).get_attribute('data-switch-ms')} ms event → painted, measured by the page)")
    # the switch itself asked nothing: no frame, no rerun, no request up to its paint
    assert page.evaluate(FIRST_PAINT_OF, [since, 4, 0]) == {"layer": "4", "head": "0", "sends": sends,
                                                           "fetches": fetches, "reruns": reruns}
    layer4, _ = model_layer_of(default_model, prompt, 4)
    np.testing.assert_allclose(page.evaluate(READ_CELLS, CELLS), [layer4[0, q, k] for q, k in CELLS],
                               rtol=1e-3, atol=1e-4)
    wait_page_head(page, 4, 0, timeout_ms=60_000)  # then the page followed
    page.wait_for_selector(f"{ROOT}[data-layers='1,2,3,4,5,6'][data-prefetch='done']", timeout=60_000)  # 4's reach
    wait_idle(page)
    assert page.evaluate("window.txvizPiledUp") == 0 and "layer=4" in page.url
    assert page.locator(ROOT).get_attribute("data-layer") == "4"  # the prefetch did not move the map


def a_layer_the_browser_lacks_comes_with_the_pick(page, default_model, prompt: str) -> None:
    """Layer 10, far from the layers held (1-6): the pick's rerun brings it, no request of its own; then
    back to 3, which the browser has."""
    assert page.locator(f"{ROOT} .txviz-layer").is_visible()
    sends, fetches = page.evaluate("window.txvizSends"), int(page.locator(ROOT).get_attribute("data-fetches"))
    reruns, since = page.evaluate("window.txvizReruns"), page.evaluate("window.txvizPaints.length")
    started = time.perf_counter()
    pick_layer(page, 10)  # far from the layers held: not in the browser yet
    page.wait_for_selector(f"{ROOT}[data-layer='10'][data-head='0']", timeout=60_000)
    print(f"\nlayer fetched and painted at 101 tokens: {(time.perf_counter() - started) * 1000:.0f} ms "
          f"({page.locator(ROOT).get_attribute('data-switch-ms')} ms event → painted, measured by the page)")
    # its first paint (a later one, a rerun's repaint, may come after the prefetch of 10's neighbours began)
    painted = page.evaluate(FIRST_PAINT_OF, [since, 10, 0])  # the pick went to the server, and its rerun brought the layer
    assert painted["layer"] == "10" and painted["reruns"] > reruns and painted["sends"] > sends
    assert int(painted["fetches"]) == fetches  # no request of its own
    layer10, _ = model_layer_of(default_model, prompt, 10)
    np.testing.assert_allclose(page.evaluate(READ_CELLS, CELLS), [layer10[0, q, k] for q, k in CELLS],
                               rtol=1e-3, atol=1e-4)
    assert "Layer 10, head 0" in page.locator(f"{ROOT} .gtitle").text_content()
    wait_page_head(page, 10, 0, timeout_ms=60_000)
    # 10's neighbours, then quiet: the layers named, since the map's "done" of 4's reach stays on it until the
    # page's view of layer 10 arrives, and a prefetch still to come would send a frame in the switch below
    page.wait_for_selector(f"{ROOT}[data-layers='1,2,3,4,5,6,8,9,10,11,12'][data-prefetch='done']", timeout=120_000)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0 and page.evaluate("window.txvizPiledUp") == 0 and "layer=10" in page.url

    sends, reruns = page.evaluate("window.txvizSends"), page.evaluate("window.txvizReruns")
    since = page.evaluate("window.txvizPaints.length")
    pick_layer(page, 3)  # back to layer 3: the browser has it and its neighbours
    page.wait_for_selector(f"{ROOT}[data-layer='3'][data-head='0']")
    painted = page.evaluate(FIRST_PAINT_OF, [since, 3, 0])
    assert (painted["sends"], painted["reruns"]) == (sends, reruns)  # nothing went to the server up to the paint
    layer3, _ = model_layer_of(default_model, prompt, 3)
    np.testing.assert_allclose(page.evaluate(READ_CELLS, CELLS), [layer3[0, q, k] for q, k in CELLS],
                               rtol=1e-3, atol=1e-4)
    wait_page_head(page, 3, 0, timeout_ms=60_000)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0 and "layer=3" in page.url
