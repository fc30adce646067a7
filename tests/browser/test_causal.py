"""The Heads page's "Test it (causal)" section in a real browser (issue 13): open the trophy sentence,
run the causal test on it against "… too small.", and read back the logit differences, the agreement
figures and the top heads by patching. Screenshots go to ``TXVIZ_ARTIFACTS``; what the page showed is
printed. The session's server keeps causal measurements in the session's memo (tests/conftest.py): when
the CLI or AppTest test of the pair ran first, the page shows their measurement (same model, same inputs)."""

from __future__ import annotations

import re
import time
from urllib.parse import quote

import pytest

from tests.helpers.browser import CHART, ERROR, POLL_MS, artifacts, browser_available, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.default_model]

reason = browser_available()
if reason:
    pytestmark.append(pytest.mark.skip(reason=reason))

TROPHY = "The trophy didn't fit in the suitcase because it was too big."
BODY = "[data-testid='stMainBlockContainer']"


NUMBER = r"[+−-]?\d+\.\d+"


def wait_text(page, text: str, timeout_ms: int) -> float:
    started = time.perf_counter()
    page.wait_for_function("t => document.querySelector(\"[data-testid='stMainBlockContainer']\")?.innerText"
                           ".includes(t)", arg=text, timeout=timeout_ms, polling=POLL_MS)
    wait_idle(page, timeout_ms=timeout_ms)
    return time.perf_counter() - started


def metric(page, label_start: str) -> float:
    box = page.locator("[data-testid='stMetric']").filter(has_text=label_start).first
    value = box.locator("[data-testid='stMetricValue']").inner_text()
    return float(value.replace("−", "-"))


def test_the_trophy_pair_shows_its_logit_difference_agreement_and_causal_heads(server, causal_memo, page,
                                                                                tmp_path):
    # causal_memo: on one worker with the other tests of this pair (tests/conftest.py): one of them measures it
    page.goto(f"{server}/heads?coref_text={quote(TROPHY)}")
    opened = wait_text(page, "Test it (causal)", timeout_ms=180_000)
    corrupt = page.locator("[class*='st-key-causal_corrupt_'] input")
    assert corrupt.input_value().startswith(TROPHY.replace("big", "small"))
    page.get_by_role("button", name="Run the causal test").click()
    ran = wait_text(page, "Top heads by patching", timeout_ms=600_000)
    assert page.locator(ERROR).count() == 0
    clean, counterfactual = metric(page, "Logit difference"), metric(page, "on the counterfactual")
    body = page.locator(BODY).inner_text()
    looks = re.search(rf"Looks at the answer vs moves the answer.*?Spearman\) ({NUMBER}|undefined), "
                      r"top-10 overlap (\d+)/10", body, re.S)
    estimate = re.search(rf"Attribution patching vs exact patching: rank correlation \(Spearman\) "
                         rf"({NUMBER}|undefined), top-10 overlap (\d+)/10", body)
    top = re.search(r"Top heads by patching: (.*?)\.\n", body + "\n").group(1)
    page.locator(".st-key-causal_chart_left").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts(tmp_path) / "causal_trophy.png"), full_page=False)
    figures = lambda m: f"spearman {m.group(1)}, top-10 overlap {m.group(2)}/10" if m else "absent"  # noqa: E731
    print(f"\nopen {opened:.1f} s, run {ran:.1f} s; logit diff clean {clean:+.3f}, counterfactual "
          f"{counterfactual:+.3f}; margin vs patching: {figures(looks)}; attribution vs exact: {figures(estimate)}"
          f"\ntop heads by patching: {top}\nL9 H4 among them: {'L9 H4 (' in top}")
    assert looks and estimate and top.startswith("L")
    for chart in ("causal_chart_left", "causal_chart_right", "causal_residual"):  # drawn, not only sent
        assert page.locator(f".st-key-{chart} {CHART}").count() >= 1, chart
