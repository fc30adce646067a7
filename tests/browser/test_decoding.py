"""The Decoding page in a real browser on SmolLM2: the tokens stream in while the run is under way (its
Stop on the page), a Stop keeps the tokens so far, a click on a token in the step viewer opens its step
(the numbers drawn, read back from the SVG's data attributes, are the library's for the same run) with
no message to the server before the charts change, a layer and head change redraws the row, a click
on a candidate's bar continues a branch from there beside the run, and a branch's own Stop keeps its
tokens so far."""

from __future__ import annotations

import time
from urllib.parse import urlencode

import pytest

from tests.helpers.browser import ERROR, POLL_MS, artifacts, browser_available, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

PROMPT = "One, two, three, four, five,"  # greedy SmolLM2 goes on " six, seven, eight,": "," at several steps
N_NEW = 16
STRIP = ".txviz-strip span"
CAPTIONS = "[data-testid='stCaptionContainer']"
VIEWER = ".txviz-dec-steps"
PILLS = f"{VIEWER} .dec-pill"
QUANTUM = 1 / 65535  # the viewer's rows: uint16 steps


def library_run(prompt: str, n_new: int):
    """The page's greedy run of ``prompt`` made by the app's own service in this process."""
    from app import cache
    from app.services import decoding
    from app.services.models import load_model

    loaded = load_model("default")
    inputs = decoding.DecodingInputs(source="default", prompt=prompt, bos="sink", chat=False, max_new_tokens=n_new)
    return decoding.run(loaded, inputs, decoding.prompt_ids(loaded, inputs, cache.limits()))


def drawn(page, selector: str, attribute: str = "data-value") -> list[float]:
    return [float(v) for v in page.eval_on_selector_all(selector, f"els => els.map(e => e.getAttribute('{attribute}'))")]


def open_step(page, index: int) -> None:
    page.wait_for_function(f"i => document.querySelector('{VIEWER} svg.dec-sampler')?.dataset.step === String(i)",
                           arg=index, timeout=30_000, polling=POLL_MS)


def open_page(page, server, **settings) -> None:
    query = urlencode({"prompt": PROMPT, "dec_chat": "0", "dec_new": N_NEW, **settings})
    page.goto(f"{server}/decoding?{query}")
    page.wait_for_selector(".st-key-dec_generate button", timeout=180_000)
    wait_idle(page)


# The viewer's step, layer and head as the page last sent them (the server's view of the step): what the page
# follows once the viewer, a moment after the reader stopped (its PICK_AFTER_MS), sends the reader's choice
PAGE_VIEW = f"""([step, layer, head]) => {{ const data = document.querySelector('{VIEWER}')?.txvizData;
  return data !== undefined && data.step === step && (layer === null || data.layer === layer)
    && (head === null || data.head === head); }}"""
# At each change of the sampler chart's step, at once (a mutation's callback runs before any timer of the
# page's): the frames the page has sent so far. The viewer paints in the click's own handler and sends the
# step a moment later; a count read from here after the paint would race that send.
WATCH_STEP_PAINTS = f"""() => {{
  const send = WebSocket.prototype.send;
  window.txvizSends = 0;
  WebSocket.prototype.send = function (...args) {{ window.txvizSends += 1; return send.apply(this, args); }};
  window.txvizStepPaints = [];
  new MutationObserver((records) => records.forEach((record) => {{
    if (record.target.classList.contains('dec-sampler'))
      window.txvizStepPaints.push({{step: Number(record.target.dataset.step), sends: window.txvizSends}});
  }})).observe(document.querySelector('{VIEWER}'), {{subtree: true, attributes: true, attributeFilter: ['data-step']}});
}}"""


def page_follows(page, step: int, layer: int | None = None, head: int | None = None) -> None:
    """Wait until the page has taken the viewer's step (and layer, head) and its rerun is done: the viewer
    sends them a moment after the reader stopped, so a wait for the rerun alone could end before it is asked."""
    page.wait_for_function(PAGE_VIEW, arg=[step, layer, head], timeout=60_000, polling=POLL_MS)
    wait_idle(page)


def caption_says(page, pattern: str, timeout_ms: int = 120_000) -> None:
    page.wait_for_function(f"p => [...document.querySelectorAll(\"{CAPTIONS}\")].some(c => new RegExp(p).test(c.innerText))",
                           arg=pattern, timeout=timeout_ms, polling=POLL_MS)


def pills_of_the_run(page) -> int:
    """The run's token count as the page's closing caption gives it, once the step viewer shows a pill for
    each: the viewer draws its pills in the browser after the script's run has ended, so a count read at
    the end of the rerun alone can come before the first pill."""
    said = page.evaluate(f"""() => [...document.querySelectorAll("{CAPTIONS}")].map(c => c.innerText)
      .map(t => t.match(/^(?:Stopped after |The model ended its text .* after |)([0-9]+) tokens/)).find(m => m)?.[1]""")
    assert said is not None, "no caption gives the run's token count"
    try:
        page.wait_for_function("([selector, n]) => document.querySelectorAll(selector).length === n",
                               arg=[PILLS, int(said)], timeout=30_000, polling=POLL_MS)
    except Exception as error:
        raise AssertionError(f"the viewer shows {page.locator(PILLS).count()} pills for a run of {said} tokens") from error
    return int(said)


def test_tokens_stream_a_stop_keeps_them_a_token_opens_its_step_and_a_candidate_branches(server, page, tmp_path,
                                                                                        default_model_home, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    check_the_page(server, page, artifacts(tmp_path))


def check_the_page(server, page, folder) -> None:
    open_page(page, server)
    started = time.perf_counter()
    page.locator(".st-key-dec_generate button").first.click()
    page.wait_for_selector(STRIP, timeout=60_000)
    first = time.perf_counter() - started
    assert page.locator(".st-key-decoding_stop button").first.is_visible()  # the run is still under way
    caption_says(page, f"{N_NEW} tokens generated|The model ended its text")
    wait_idle(page)
    print(f"\nfirst token on screen {first:.2f} s after Generate; {N_NEW} tokens done {time.perf_counter() - started:.2f} s")
    assert page.locator(ERROR).count() == 0 and page.locator(".st-key-decoding_stop").count() == 0
    assert pills_of_the_run(page) > 1
    tokens = page.locator(PILLS)
    run = library_run(PROMPT, N_NEW)  # the same greedy run made by the library in this process

    words = [label.rsplit(" ", 1)[0] for label in tokens.all_inner_texts()]  # each label ends in its step
    repeated = next((i for i, word in enumerate(words) if word in words[i + 1:]), 2)  # a token written twice, if any
    page.evaluate(WATCH_STEP_PAINTS)
    for index in dict.fromkeys((repeated, 2)):  # a click on a token opens its own step, not another one that reads alike
        sent, since = page.evaluate("[window.txvizSends, window.txvizStepPaints.length]")
        tokens.nth(index).click()
        open_step(page, index)
        painted = page.evaluate("([since, step]) => window.txvizStepPaints.slice(since).find((p) => p.step === step)",
                                [since, index])
        assert painted == {"step": index, "sends": sent}  # the charts changed before any message went to the server
        step = run.steps[index]
        assert page.locator(f"{VIEWER} .dec-heading").inner_text().startswith(f"Step {index}: the token at position {step.position}")
        raw = drawn(page, f"{VIEWER} svg.dec-sampler rect[data-series='raw']")
        assert raw == pytest.approx([c.prob for c in step.candidates], abs=2e-6)
        assert drawn(page, f"{VIEWER} svg.dec-sampler rect.dec-chosen", "data-token") == [step.token.id]
        assert drawn(page, f"{VIEWER} svg.dec-kv-chart rect.dec-kv", "data-bytes") == list(step.kv_bytes_per_layer)
        page_follows(page, index)
    assert page.locator(f"{VIEWER} .dec-pill[aria-pressed='true']").inner_text().endswith("2")

    page.locator(f"{VIEWER} .dec-layer").select_option("5")  # the layer, then the head, after choosing step 2
    page.locator(f"{VIEWER} .dec-head").select_option("4")
    page.wait_for_function(f"() => {{ const s = document.querySelector('{VIEWER} svg.dec-row').dataset; "
                           f"return s.layer === '5' && s.head === '4'; }}", timeout=30_000, polling=POLL_MS)
    row = drawn(page, f"{VIEWER} svg.dec-row rect.dec-weight")
    assert row == pytest.approx(run.steps[2].attention[5][4].tolist(), abs=QUANTUM)
    said = page.locator(f"{VIEWER} .dec-facts p").nth(1)  # the row's sum the viewer computed, as far as its steps tell
    keys, summed = len(row), float(run.steps[2].attention[5][4].sum())
    assert int(said.get_attribute("data-keys")) == keys
    assert float(said.get_attribute("data-within")) == pytest.approx(keys * QUANTUM / 2)
    assert float(said.get_attribute("data-sum")) == pytest.approx(summed, abs=keys * QUANTUM / 2 + 1e-9)
    assert f"sums to {float(said.get_attribute('data-sum')):.3f} (± " in said.inner_text()
    page_follows(page, 2, 5, 4)
    page.wait_for_function("() => new URLSearchParams(location.search).get('layer') === '5'", timeout=30_000,
                           polling=POLL_MS)  # the page's layer followed the viewer's (kept in the URL)
    page.screenshot(path=str(folder / "decoding-viewer.png"))

    other = page.locator(f"{VIEWER} svg.dec-sampler rect.dec-candidate").first  # a candidate continues a branch
    token = int(other.get_attribute("data-token"))
    other.click()
    caption_says(page, "reused the cache of")
    wait_idle(page)
    assert page.locator(".st-key-dec_branch").is_visible() and page.locator(ERROR).count() == 0
    assert token != run.steps[2].token.id
    assert page.locator("[data-testid='stColumn']:has-text('The branch from step 2')").count() >= 1
    page.screenshot(path=str(folder / "decoding-branch.png"))

    open_page(page, server, dec_sampler="sample", dec_temp="0.9", dec_seed="5", dec_new="64")
    page.locator(".st-key-dec_generate button").first.click()
    page.wait_for_function(f"() => document.querySelectorAll('{STRIP}').length >= 3", timeout=60_000, polling=POLL_MS)
    page.locator(".st-key-decoding_stop button").first.click()
    caption_says(page, "Stopped after [0-9]+ tokens by a click")
    wait_idle(page)
    kept = pills_of_the_run(page)
    assert 3 <= kept < 64 and page.locator(ERROR).count() == 0
    page.screenshot(path=str(folder / "decoding-stopped.png"))

    page.locator(PILLS).first.click()  # step 0: a branch from there may run 63 steps, time enough to stop it
    open_step(page, 0)
    page_follows(page, 0)  # the viewer sends the step once the reader stops; the branches follow it
    page.wait_for_function("() => [...document.querySelectorAll('p')].some(p => p.innerText.startsWith('Branch from step 0:'))",
                           timeout=30_000, polling=POLL_MS)
    page.locator(".st-key-dec_branch button").first.click()
    caption_says(page, "branch token ([3-9]|[1-9][0-9]+) of at most", timeout_ms=60_000)  # the branch's own tokens
    page.locator(".st-key-decoding_branch_stop button").first.scroll_into_view_if_needed()
    page.screenshot(path=str(folder / "decoding-branch-streaming.png"))
    page.locator(".st-key-decoding_branch_stop button").first.click()
    caption_says(page, "It was stopped by a click")
    wait_idle(page)
    branch_tokens = page.locator("[data-testid='stColumn']:has-text('The branch from step 0') .txviz-strip span").count()
    assert 3 <= branch_tokens < 64 and page.locator(ERROR).count() == 0
    assert page.locator(".st-key-decoding_branch_stop").count() == 0
    boxes = page.eval_on_selector_all(".txviz-strip span[title^='step ']", "els => els.map(e => [e.className, e.title,"
                                      " getComputedStyle(e).borderStyle])")
    assert boxes and all((kind == "g") == ("not compared: the" in title) for kind, title, _ in boxes)
    assert all(border == "dashed" for kind, _, border in boxes if kind == "g")  # the greyed look is drawn
    page.locator("[data-testid='stColumn']:has-text('The branch from step 0')").first.scroll_into_view_if_needed()
    page.screenshot(path=str(folder / "decoding-branch-stopped.png"))


FIT = f"""() => {{
  const root = document.querySelector('{VIEWER}'), box = (e) => e.getBoundingClientRect();
  const view = box(root), charts = [...root.querySelectorAll('svg')].map((svg) => {{
    const frame = box(svg), title = box(svg.querySelector('.dec-title'));
    const labels = [...svg.querySelectorAll('.dec-label')].map(box);
    return {{ name: svg.getAttribute('class'), left: frame.left, right: frame.right, top: frame.top, bottom: frame.bottom,
             title_right: title.right, labels_left: Math.min(...labels.map((r) => r.left), frame.left) }};
  }});
  return {{ left: view.left, right: view.right, stacked: root.classList.contains('dec-stacked'), charts }};
}}"""


def overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] - 1 and b["left"] < a["right"] - 1 and a["top"] < b["bottom"] - 1 and b["top"] < a["bottom"] - 1


def test_the_viewers_titles_labels_and_charts_stay_inside_at_a_wide_and_a_narrow_width(server, page, default_model_home,
                                                                                        monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    open_page(page, server)
    page.locator(".st-key-dec_generate button").first.click()
    page.wait_for_selector(f"{VIEWER}[data-painted]", timeout=180_000)
    wait_idle(page)
    last = page.locator(PILLS).count() - 1  # its row's keys are the most, their bands the narrowest; the first
    page.locator(PILLS).nth(last).click()  # key's label, the sink token's, is the longest
    open_step(page, last)
    for width, stacked in ((1500, False), (900, True)):
        page.set_viewport_size({"width": width, "height": 1100})
        page.wait_for_function(f"s => {{ const r = document.querySelector('{VIEWER}'); return r.classList.contains('dec-stacked') "
                               f"=== s && +r.querySelector('svg.dec-sampler').getAttribute('width') <= r.clientWidth; }}",
                               arg=stacked, timeout=30_000, polling=POLL_MS)
        fit = page.evaluate(FIT)
        assert fit["stacked"] == stacked
        for chart in fit["charts"]:
            assert chart["right"] <= fit["right"] + 1, (width, chart)  # no chart runs past the viewer
            assert chart["title_right"] <= chart["right"] + 1, (width, chart)  # its title is cut to fit, not clipped
            assert chart["labels_left"] >= chart["left"] - 1, (width, chart)  # the first turned labels are inside
        heads = page.evaluate(f"() => {{ const box = document.querySelector('{VIEWER} .dec-heads'), canvas = box.querySelector('canvas'); "
                              f"return [box.querySelector('.dec-heads-title').getBoundingClientRect().bottom, "
                              f"canvas.getBoundingClientRect().top + Number(canvas.dataset.rowsTop)]; }}")
        assert 0 <= heads[1] - heads[0] <= 12, heads  # the heads' rows right under their title, no blank band
        for i, a in enumerate(fit["charts"]):
            assert not any(overlap(a, b) for b in fit["charts"][i + 1:]), (width, fit["charts"])
    assert page.locator(ERROR).count() == 0


def test_past_the_byte_budget_a_layer_change_brings_that_layer_and_the_note_names_every_layer_held(server, page,
                                                                                                  default_model_home,
                                                                                                  monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    open_page(page, server, prompt=" ".join([PROMPT] * 5), dec_new="90")  # 90 steps of 60-150 keys: past 4 MB
    page.locator(".st-key-dec_generate button").first.click()
    page.wait_for_selector(f"{VIEWER}[data-painted]", timeout=300_000)
    wait_idle(page)
    note = page.locator(f"{VIEWER} .dec-note")
    assert note.is_visible() and note.get_attribute("data-held") == "0"  # the page's layer only
    last = page.locator(PILLS).count() - 1
    page.locator(PILLS).nth(last).click()  # a row too long to label each key: its positions at a round step
    open_step(page, last)
    keys = int(page.locator(f"{VIEWER} .dec-heading").inner_text().split("position ")[1].split()[0])
    positions = drawn(page, f"{VIEWER} svg.dec-row .dec-position", "data-position")
    assert page.locator(f"{VIEWER} svg.dec-row .dec-label").count() == 0 and positions[0] == 0 and 3 <= len(positions) <= 10
    assert positions[-1] < keys and len({b - a for a, b in zip(positions, positions[1:])}) == 1
    page.locator(f"{VIEWER} .dec-layer").select_option("7")
    page.wait_for_function(f"() => document.querySelector('{VIEWER} svg.dec-row').dataset.layer === '7'", timeout=60_000,
                           polling=POLL_MS)
    assert note.get_attribute("data-held") == "0,7" and "holds layers 0, 7;" in note.inner_text()
    wait_idle(page)
    page.locator(f"{VIEWER} .dec-layer").select_option("0")  # a layer the browser holds: drawn without the server
    page.wait_for_function(f"() => document.querySelector('{VIEWER} svg.dec-row').dataset.layer === '0'", timeout=5_000,
                           polling=POLL_MS)
    assert page.locator(ERROR).count() == 0


def test_the_caches_size_reads_in_the_unit_that_fits_it(server, page, default_model_home, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    open_page(page, server, dec_new="2")  # a short run: SmolLM2's cache is some hundred KiB
    page.locator(".st-key-dec_generate button").first.click()
    page.wait_for_selector(f"{VIEWER}[data-painted]", timeout=180_000)
    wait_idle(page)
    cache = page.locator(f"{VIEWER} .dec-cache")
    measured = int(cache.get_attribute("data-bytes"))
    value, unit = cache.locator("b").inner_text().split(": ")[1].split()
    assert measured < 2 ** 20 and unit == "KiB" and float(value) == pytest.approx(measured / 1024, abs=0.05)
