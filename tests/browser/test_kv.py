"""The KV cache & memory page in a real browser: the preset journey (Falcon 7B, MQA, then
Mistral 7B or an uploaded Llama 3 8B config.json) shows the new model's own bytes; a malformed or huge
config.json gets a message, not a traceback; the page opens on the calculator without running the model; the
cache growth replays; the per-layer sweep says how long and stops; the live model as MHA holds three times
the cache."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers.browser import (CHART, ERROR, IDLE, POLL_MS, artifacts, browser_available, rerun_mark, wait_idle,
                                   wait_until_drawn)
from tests.helpers.published_hf_configs import LLAMA_3_8B
from txviz.analysis.kv.presets import PRESETS

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

METRICS = "[data-testid='stMetric']"


@pytest.fixture
def page(server, page):
    """A new session on the KV page, in the worker's kept page (tests/browser/conftest.py)."""
    started = time.perf_counter()
    page.goto(f"{server}/kv-cache")
    page.wait_for_selector(f".st-key-mem_total {CHART}", timeout=180_000)
    wait_idle(page)
    print(f"\nKV page open → every figure painted: {time.perf_counter() - started:.1f} s")
    assert page.locator(ERROR).count() == 0
    return page


def per_token_metric(page) -> list[str]:
    """[label, value] of the per-token metric as the browser shows it."""
    text = next(t for t in page.locator(METRICS).all_inner_texts() if t.startswith("KV bytes per token"))
    return [line.strip() for line in text.splitlines() if line.strip()][:2]


def expected(key: str) -> str:
    p = PRESETS[key]
    return f"{2 * p['n_layers'] * p['kv_heads'] * p['head_dim'] * 2 / 1024:,.1f} KiB"  # bf16 K and V


def choose_preset(page, name: str) -> None:
    page.locator(".st-key-mem_preset button[aria-label='Open']").click()
    page.get_by_role("option", name=name, exact=True).click()
    page.wait_for_function("n => document.querySelector('.st-key-mem_preset input')?.value === n", arg=name,
                           polling=POLL_MS)
    wait_idle(page)


def choose_kind(page, kind: str) -> None:
    page.locator(".st-key-mem_kind button", has_text=kind).click()
    page.wait_for_function("k => [...document.querySelectorAll(\"[data-testid='stMetric']\")]"
                           ".some(m => m.innerText.includes(`KV bytes per token (${k})`))", arg=kind, timeout=60_000,
                           polling=POLL_MS)
    wait_idle(page)


def test_one_session_on_the_page_presets_an_upload_and_malformed_ones_then_cache_growth_replays_then_the_sweep_stops_and_mha_triples_the_cache(
        page, tmp_path):
    """One session, one load of the page (each load costs chromium and the server about 4 CPU s): the page
    opens on the calculator (its figures drawn, nothing else computed), which takes presets, an upload and
    files it cannot read; then each tab computes its own when opened, from the loaded model whatever the
    calculator holds (here: the last file's message)."""
    page.wait_for_selector(f".st-key-mem_context {CHART}", timeout=180_000)
    assert page.locator(".st-key-kv_growth").count() == 0  # not computed before it is opened
    the_preset_journey_shows_each_models_own_bytes_and_an_upload_after_mqa_is_named_from_the_file(page, tmp_path)
    cache_growth_opens_on_its_tab_and_replays(page, tmp_path)
    the_sharing_tab_sweep_says_how_long_and_stops_on_a_click_and_the_mha_toggle_triples_the_cache(page, tmp_path)


def the_preset_journey_shows_each_models_own_bytes_and_an_upload_after_mqa_is_named_from_the_file(
        page, tmp_path) -> None:
    choose_preset(page, "Falcon 7B")
    choose_kind(page, "MQA")
    assert per_token_metric(page) == ["KV bytes per token (MQA)", expected("falcon-7b")]
    choose_preset(page, "Mistral 7B v0.1")
    page.wait_for_function("() => document.body.innerText.includes('KV bytes per token (GQA)')", timeout=60_000,
                           polling=POLL_MS)
    assert per_token_metric(page) == ["KV bytes per token (GQA)", expected("mistral-7b-v0.1")]
    assert "GQA: 32 layers, 32 query heads, 8 KV heads" in page.locator("body").inner_text()
    assert page.locator(ERROR).count() == 0
    page.locator(".st-key-mem_total").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "kv_mistral_after_falcon_mqa.png"), full_page=False)
    choose_kind(page, "MQA")  # MQA again, on Mistral this time, then a file of one's own
    an_upload_is_named_from_the_file_and_shows_its_own_bytes(page, tmp_path)


def an_upload_is_named_from_the_file_and_shows_its_own_bytes(page, tmp_path) -> None:
    page.locator(".st-key-mem_source").get_by_text("Your config.json").click()
    # on a loaded machine the rerun may start after wait_idle's pause: wait for the box to go, then look
    page.locator(".st-key-mem_preset").wait_for(state="detached", timeout=60_000)
    wait_idle(page)
    assert page.locator(".st-key-mem_preset").count() == 0  # the preset box is gone while the upload is chosen
    path = tmp_path / "Meta-Llama-3-8B.json"
    path.write_text(json.dumps(LLAMA_3_8B))
    mark = rerun_mark(page)
    page.locator(".st-key-mem_upload input[type=file]").set_input_files(str(path))
    wait_idle(page, timeout_ms=60_000, since=mark)  # the rerun the file asked for, once it was sent
    page.wait_for_function("() => document.body.innerText.includes('KV bytes per token (GQA)')", timeout=60_000,
                           polling=POLL_MS)
    layers, kv_heads = LLAMA_3_8B["num_hidden_layers"], LLAMA_3_8B["num_key_value_heads"]
    head_dim = LLAMA_3_8B["hidden_size"] // LLAMA_3_8B["num_attention_heads"]
    assert per_token_metric(page) == ["KV bytes per token (GQA)",
                                      f"{2 * layers * kv_heads * head_dim * 2 / 1024:,.1f} KiB"]
    assert "Meta-Llama-3-8B (LlamaForCausalLM, 8.03 B params, 32 layers × 4096) — GQA" in page.locator("body").inner_text()
    assert page.locator(ERROR).count() == 0
    page.screenshot(path=str(artifacts(tmp_path) / "kv_upload_after_mqa.png"), full_page=False)
    a_malformed_or_huge_config_upload_gets_a_message(page, tmp_path)


def a_malformed_or_huge_config_upload_gets_a_message(page, tmp_path) -> None:
    """After a file it could read (its figures drawn), files it cannot: a message each, no traceback, and
    no numbers."""
    files = {"broken.json": "{not json", "list_type.json": json.dumps({"model_type": ["llama"]}),
             "array.json": "[1, 2, 3]", "huge.json": "{" + " " * (2 << 20) + "}"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    # the last upload's numbers, drawn: plotly draws the chart once it is in the page, after the run
    wait_until_drawn(page, "(s) => document.querySelector(s) !== null", f".st-key-mem_total {CHART}",
                     seen="() => document.querySelector('.st-key-mem_total')?.innerHTML.slice(0, 200) ?? 'no chart element'",
                     what="the upload's bill chart drawn")
    page.locator(".st-key-mem_source").get_by_text("Your config.json").click()  # chosen already: no rerun
    upload = page.locator(".st-key-mem_upload input[type=file]")
    for name in ("broken.json", "list_type.json", "array.json"):
        mark = rerun_mark(page)
        upload.set_input_files(str(tmp_path / name))
        wait_idle(page, timeout_ms=60_000, since=mark)  # the rerun this file asked for, once it was sent
        page.wait_for_function(f"() => document.body.innerText.includes('Could not read {name}')",
                               timeout=60_000, polling=POLL_MS)
        assert page.locator(ERROR).count() == 0, name
        # no numbers for a file it cannot read: the last file's chart, left out of this run, is taken out of
        # the page a moment after the run's end has reached the test
        wait_until_drawn(page, "(s) => document.querySelectorAll(s).length === 0", f".st-key-mem_total {CHART}",
                         seen="(s) => document.querySelectorAll(s).length", what=f"no bill chart for {name}")
    upload.set_input_files(str(tmp_path / "huge.json"))  # over the 1 MB limit: refused before it is read
    page.wait_for_function("() => /1(\\.0)?\\s?MB|too large|larger/i.test(document.body.innerText)",
                           timeout=60_000, polling=POLL_MS)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    page.wait_for_selector(IDLE)
    # the refused file is never sent: the error left on screen names the file it is about, and the limit
    # is in the box's label, not only in the hover on the refused file's mark
    alerts = " ".join(page.locator("[data-testid='stAlert']").all_inner_texts())
    assert "Could not read array.json" in alerts and "huge.json" not in alerts
    assert "(at most 1 MiB)" in page.locator(".st-key-mem_upload").inner_text()


SLIDER_JS = "() => document.querySelector('.st-key-kv_growth .js-plotly-plot')._fullLayout.sliders[0].active"
# Each frame the animation shows, noted as plotly shows it (a replay's frames last 120 ms: a wait for the slider
# to be at the start could begin after it has moved on); returns the slider's steps, the frames' names in order
WATCH_FRAMES = """() => { const plot = document.querySelector('.st-key-kv_growth .js-plotly-plot');
  window.txvizFrames = [];
  plot.on('plotly_animatingframe', (event) => window.txvizFrames.push(event.name));
  return plot._fullLayout.sliders[0].steps.map((step) => step.label); }"""


def cache_growth_opens_on_its_tab_and_replays(page, tmp_path) -> None:
    assert page.locator(".st-key-kv_growth").count() == 0  # not computed before it is opened
    started = time.perf_counter()
    page.get_by_role("tab", name="Cache growth").click()
    page.wait_for_selector(f".st-key-kv_growth {CHART}", timeout=180_000)
    wait_idle(page)
    print(f"\nCache growth tab click → animation painted: {time.perf_counter() - started:.1f} s")
    last = page.evaluate(SLIDER_JS)
    assert last > 0
    steps = page.evaluate(WATCH_FRAMES)
    page.locator(".st-key-kv_growth .updatemenu-button").first.click()  # ▶ Play
    page.wait_for_function("name => window.txvizFrames.includes(name)", arg=steps[-1], timeout=30_000, polling=POLL_MS)
    assert page.evaluate("window.txvizFrames")[0] == steps[0]  # it went back to the start…
    page.wait_for_function(f"() => ({SLIDER_JS})() === {last}", timeout=30_000, polling=POLL_MS)  # …and played through
    assert page.locator(ERROR).count() == 0
    page.locator(".st-key-kv_growth").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "kv_growth.png"), full_page=False)


def the_sharing_tab_sweep_says_how_long_and_stops_on_a_click_and_the_mha_toggle_triples_the_cache(
        page, tmp_path) -> None:
    page.get_by_role("tab", name="Sharing KV heads").click()  # the loaded model runs when this opens
    page.wait_for_selector(".st-key-layers_run button", timeout=180_000)
    page.wait_for_selector(".st-key-live_kv button", timeout=180_000)
    wait_idle(page)
    assert "About " in page.locator("body").inner_text() and "38 steps over" in page.locator("body").inner_text()
    page.locator(".st-key-layers_run button").click()
    page.wait_for_function("() => /step \\d+ of 38/.test(document.body.innerText)", timeout=60_000, polling=POLL_MS)
    page.locator(".st-key-layers_stop button").first.click()
    page.wait_for_function("() => document.body.innerText.includes('Stopped after')", timeout=60_000, polling=POLL_MS)
    wait_idle(page)
    assert page.locator(".st-key-layers_kl").count() == 0 and page.locator(ERROR).count() == 0
    assert page.locator(".st-key-layers_run button").count() == 1  # it can be started again

    before = page.locator(METRICS).all_inner_texts()
    page.locator(".st-key-live_kv button", has_text="MHA").click()
    page.wait_for_function("() => [...document.querySelectorAll(\"[data-testid='stMetric']\")]"
                           ".some(m => m.innerText.includes('+200%'))", timeout=180_000, polling=POLL_MS)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    after = page.locator(METRICS).all_inner_texts()
    assert before != after
    page.locator(".st-key-live_kv").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "kv_mha.png"), full_page=False)
