"""The Decoding page in a real browser on SmolLM2: the tokens stream in while the run is under way (its
Stop on the page), a Stop keeps the tokens so far, a click on a token opens its step, a click on a
candidate continues a branch from there beside the run, and a branch's own Stop keeps its tokens so far."""

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


def open_page(page, server, **settings) -> None:
    query = urlencode({"prompt": PROMPT, "dec_chat": "0", "dec_new": N_NEW, **settings})
    page.goto(f"{server}/decoding?{query}")
    page.wait_for_selector(".st-key-dec_generate button", timeout=180_000)
    wait_idle(page)


def caption_says(page, pattern: str, timeout_ms: int = 120_000) -> None:
    page.wait_for_function(f"p => [...document.querySelectorAll(\"{CAPTIONS}\")].some(c => new RegExp(p).test(c.innerText))",
                           arg=pattern, timeout=timeout_ms, polling=POLL_MS)


def test_tokens_stream_a_stop_keeps_them_a_token_opens_its_step_and_a_candidate_branches(server, page, tmp_path):
    folder = artifacts(tmp_path)
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
    tokens = page.locator(".st-key-dec_pick button")
    assert tokens.count() > 1

    words = [label.rsplit(" ", 1)[0] for label in tokens.all_inner_texts()]  # each label ends in its step
    repeated = next((i for i, word in enumerate(words) if word in words[i + 1:]), 2)  # a token written twice, if any
    for index in (repeated, 2):  # a click on a token opens its own step, not another one that reads alike
        tokens.nth(index).click()
        page.wait_for_function("i => [...document.querySelectorAll('h3')].some(h => h.innerText.startsWith(`Step ${i}:`))",
                               arg=index, timeout=30_000, polling=POLL_MS)
        wait_idle(page)
    page.locator(".st-key-dec_branch button").first.click()  # a candidate continues a branch from step 2
    caption_says(page, "reused the cache of")
    wait_idle(page)
    assert page.locator(".st-key-dec_branch").is_visible() and page.locator(ERROR).count() == 0
    page.screenshot(path=str(folder / "decoding-branch.png"))

    open_page(page, server, dec_sampler="sample", dec_temp="0.9", dec_seed="5", dec_new="64")
    page.locator(".st-key-dec_generate button").first.click()
    page.wait_for_function(f"() => document.querySelectorAll('{STRIP}').length >= 3", timeout=60_000, polling=POLL_MS)
    page.locator(".st-key-decoding_stop button").first.click()
    caption_says(page, "Stopped \\(the Stop button\\) after")
    wait_idle(page)
    kept = page.locator(".st-key-dec_pick button").count()
    assert 3 <= kept < 64 and page.locator(ERROR).count() == 0
    page.screenshot(path=str(folder / "decoding-stopped.png"))

    tokens.first.click()  # step 0: a branch from there may run 63 steps, time enough to stop it
    page.wait_for_function("() => [...document.querySelectorAll('h3')].some(h => h.innerText.startsWith('Step 0:'))",
                           timeout=30_000, polling=POLL_MS)
    wait_idle(page)
    page.locator(".st-key-dec_branch button").first.click()
    page.wait_for_function(f"() => document.querySelectorAll('{STRIP}').length >= 3", timeout=60_000, polling=POLL_MS)
    page.locator(".st-key-decoding_branch_stop button").first.scroll_into_view_if_needed()
    page.screenshot(path=str(folder / "decoding-branch-streaming.png"))
    page.locator(".st-key-decoding_branch_stop button").first.click()
    caption_says(page, "It was stopped \\(the Stop button\\)")
    wait_idle(page)
    branch_tokens = page.locator("[data-testid='stColumn']:has-text('The branch from step 0') .txviz-strip span").count()
    assert 3 <= branch_tokens < 64 and page.locator(ERROR).count() == 0
    assert page.locator(".st-key-decoding_branch_stop").count() == 0
    page.locator("[data-testid='stColumn']:has-text('The branch from step 0')").first.scroll_into_view_if_needed()
    page.screenshot(path=str(folder / "decoding-branch-stopped.png"))
