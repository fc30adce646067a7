"""The Coreference tab in a real browser: click words in the strips, replace the sentence, and the
marks, the headline and the link follow the new sentence; the query position and
the model's own answer; a link opens the tab, and its "Test it (causal)" section runs on the
linked trophy sentence against "… too small." and shows the logit differences, the agreement figures and
the top heads by patching; marks survive a visit to Detectors; a typed sentence ranks the heads from its
pronoun to its antecedent. Screenshots go to ``TXVIZ_ARTIFACTS``; each step's time and what the causal
test showed are printed.

The causal run uses the session's memo (tests/conftest.py): when the CLI or AppTest test of the pair ran
first, the page shows their measurement (same model, same inputs), so the test waits little for it in the
suite (on its own, the server measures the pair: about 20 CPU s). It shares the link's session with the
coreference steps: one load of the Heads page and one ranking of the trophy sentence, not two (about
5 CPU s of chromium and the server each)."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

import pytest

from tests.helpers.browser import CHART, ERROR, POLL_MS, artifacts, browser_available, wait_idle, wait_until_drawn

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

TROPHY = "The trophy didn't fit in the suitcase because it was too big."
BODY = "[data-testid='stMainBlockContainer']"
NUMBER = r"[+−-]?\d+\.\d+"


def strip(page, name: str):
    return page.locator(f"[class*='st-key-coref_{name}_']")


def selected(page, name: str) -> list[str]:
    """The words shown as selected in a strip (pills are radios or checkboxes with aria-checked)."""
    buttons = strip(page, name).locator("button[aria-checked='true'], button[aria-pressed='true']")
    return [b.inner_text().strip() for b in buttons.all()]


def click_word(page, name: str, word: str) -> None:
    strip(page, name).locator("button").filter(has_text=re.compile(f"^{re.escape(word)}$")).first.click()


def metric(page, label_start: str) -> float:
    box = page.locator("[data-testid='stMetric']").filter(has_text=label_start).first
    value = box.locator("[data-testid='stMetricValue']").inner_text()
    return float(value.replace("−", "-"))


def wait_text(page, text: str, timeout_ms: int = 120_000) -> float:
    """Seconds until ``text`` is on the page and the script is idle."""
    started = time.perf_counter()
    page.wait_for_function("t => document.querySelector(\"[data-testid='stMainBlockContainer']\")?.innerText"
                           ".includes(t)", arg=text, timeout=timeout_ms, polling=POLL_MS)
    wait_idle(page)
    return time.perf_counter() - started


def test_marks_follow_a_new_sentence(server, page, tmp_path):
    times = {}
    page.goto(f"{server}/heads")
    wait_idle(page, timeout_ms=180_000)
    page.get_by_role("tab", name="Coreference").click()
    times["open"] = wait_text(page, "put the most attention from she")
    assert selected(page, "pronoun") == ["she"] and selected(page, "candidates") == ["Mary", "John"]

    click_word(page, "pronoun", "him")
    times["click pronoun"] = wait_text(page, "put the most attention from him")
    click_word(page, "candidates", "station")
    times["add candidate"] = wait_text(page, "station (token")
    assert selected(page, "candidates") == ["Mary", "John", "station"]
    assert page.locator(ERROR).count() == 0

    sentence = page.locator(".st-key-coref_text input")
    sentence.fill(TROPHY)
    sentence.press("Enter")
    times["new sentence"] = wait_text(page, "put the most attention from it")
    body = page.locator(BODY).inner_text()
    assert selected(page, "pronoun") == ["it"] and selected(page, "candidates") == ["trophy", "suitcase"]
    assert selected(page, "deciding") == ["big"]
    assert "on trophy" in body and "from him" not in body and "station (token" not in body
    assert "At “it” no head can know the answer" in body and "attention at “it” is 0." in body
    assert "trophy (token “ trophy”)" in body and "the model prefers" in body
    assert "coref_text=" in page.url and "trophy" in page.url
    assert page.locator(ERROR).count() == 0
    page.locator("[class*='st-key-coref_pronoun_']").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "coref_new_sentence.png"), full_page=False)

    page.locator("[class*='st-key-coref_query_'] label", has_text="the completion's end").click()
    times["query at completion end"] = wait_text(page, "put the most attention from the (token")
    page.wait_for_selector(f".st-key-coref_grid {CHART}")
    assert page.locator(ERROR).count() == 0
    page.locator(".st-key-coref_grid").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "coref_completion_end.png"), full_page=False)
    print("\n" + ", ".join(f"{step}: {seconds:.2f} s" for step, seconds in times.items()))


def test_a_link_opens_its_tab_the_causal_test_runs_on_it_marks_survive_a_visit_to_detectors_and_a_typed_sentence_is_ranked(
        server, causal_memo, page, tmp_path):
    # causal_memo: on one worker with the other tests of the trophy pair (tests/conftest.py): one of them measures it
    started = time.perf_counter()
    page.goto(f"{server}/heads?coref_text={quote(TROPHY)}")
    wait_text(page, "put the most attention from it", timeout_ms=180_000)  # opened on Coreference
    print(f"\nlink → coreference ranking: {time.perf_counter() - started:.2f} s")
    assert page.get_by_role("tab", name="Coreference").get_attribute("aria-selected") == "true"
    the_trophy_pair_shows_its_logit_difference_agreement_and_causal_heads(page, tmp_path, started)
    click_word(page, "candidates", "fit")  # after the run: the causal test's candidates are the link's
    wait_text(page, "fit (token")
    page.get_by_role("tab", name="Detectors").click()
    page.wait_for_selector(f".st-key-det_prev {CHART}", timeout=60_000)
    wait_idle(page)
    page.get_by_role("tab", name="Coreference").click()
    wait_text(page, "fit (token")
    assert selected(page, "candidates") == ["trophy", "fit", "suitcase"]
    assert page.locator(ERROR).count() == 0
    a_typed_sentence_ranks_heads_from_its_pronoun_to_its_antecedent(page, tmp_path)


def the_trophy_pair_shows_its_logit_difference_agreement_and_causal_heads(page, tmp_path, started: float) -> None:
    wait_text(page, "Test it (causal)", timeout_ms=180_000)
    opened = time.perf_counter() - started  # from the link's load
    corrupt = page.locator("[class*='st-key-causal_corrupt_'] input")
    assert corrupt.input_value().startswith(TROPHY.replace("big", "small"))
    page.get_by_role("button", name="Run the causal test").click()
    ran = wait_text(page, "Every head, sorted by", timeout_ms=600_000)
    assert page.locator(ERROR).count() == 0
    clean, counterfactual = metric(page, "Logit difference"), metric(page, "on the counterfactual")
    body = page.locator(BODY).inner_text()
    looks = re.search(rf"Looks at the answer vs moves the answer.*?Spearman\) ({NUMBER}|undefined), "
                      r"top-10 overlap (\d+)/10", body, re.S)
    estimate = re.search(rf"Attribution patching vs exact patching: rank correlation \(Spearman\) "
                         rf"({NUMBER}|undefined), top-10 overlap (\d+)/10", body)
    flips = clean > 0 > counterfactual  # SmolLM2 prefers "suitcase" on both: said first, ranking no finding
    assert ("does not flip the answer" not in body) is flips
    top = re.search(r"(?:Top heads by patching|Largest patching effects \(.*?\)): (.*?)\.\n", body + "\n").group(1)
    page.locator(".st-key-causal_chart_left").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "causal_trophy.png"), full_page=False)
    figures = lambda m: f"spearman {m.group(1)}, top-10 overlap {m.group(2)}/10" if m else "absent"  # noqa: E731
    print(f"\nopen {opened:.1f} s, run {ran:.1f} s; logit diff clean {clean:+.3f}, counterfactual "
          f"{counterfactual:+.3f}; margin vs patching: {figures(looks)}; attribution vs exact: {figures(estimate)}"
          f"\ntop heads by patching: {top}\nL9 H4 among them: {'L9 H4 (' in top}")
    assert looks and estimate and top.startswith("L")
    for chart in ("causal_chart_left", "causal_chart_right", "causal_residual"):  # drawn, not only sent
        # plotly draws each chart once it is in the page, after the run has ended
        wait_until_drawn(page, "(s) => document.querySelector(s) !== null", f".st-key-{chart} {CHART}",
                         seen=f"() => document.querySelector('.st-key-{chart}')?.innerHTML.slice(0, 200) ?? 'no element'",
                         what=f"{chart} drawn")


def a_typed_sentence_ranks_heads_from_its_pronoun_to_its_antecedent(page, tmp_path) -> None:
    sentence = page.locator(".st-key-coref_text input")
    sentence.fill("Anna called Peter because she needed help.")
    sentence.press("Enter")
    page.wait_for_function("() => /from she \\(token #\\d+\\) on Anna/.test(document.body.innerText)",
                           timeout=60_000, polling=POLL_MS)
    wait_idle(page)
    assert page.locator(ERROR).count() == 0
    text = page.locator(BODY).inner_text()
    assert "Best heads first" in text
    page.wait_for_selector(f".st-key-coref_grid {CHART}")
    page.locator(".st-key-coref_grid").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "coreference.png"), full_page=False)
