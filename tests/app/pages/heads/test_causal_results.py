"""The causal test's results. When the counterfactual does not flip the model's answer it is said first,
with both logit differences, before any ranking, and the patching ranking is not called a finding; a
counterfactual edited so that the answer flips removes the warning (on the zoo's tiny base_long). A rank
correlation is shown with the digits it needs."""

from __future__ import annotations

import re

import pytest

from app.app_pages.heads import causal_results
from app.services.zoo import zoo_path
from tests.helpers.apptest import app_on, no_errors, page_path, shown

SENTENCE = "Mary gave the book to John because she was happy."  # words of the tiny model's stories
FLIPPING_END = "She gave the book to a"  # after it the tiny model names "book", not "Mary"


@pytest.fixture(autouse=True)
def fresh_stores():
    """A causal report is kept for every session of the process: each test starts without one."""
    from app import cache

    cache._shared.clear()
    yield
    cache._shared.clear()


def causal_run(at):
    at.button(key="causal_run").click().run()
    no_errors(at)
    return at


def in_order(at) -> list[tuple[str, str]]:
    """(element type, its text or key) of the page's elements, top to bottom."""
    def walk(node):
        children = getattr(node, "children", None)
        if children is None:
            kind = type(node).__name__
            text = node.label if kind == "Metric" else getattr(node, "value", None)
            yield kind, text if isinstance(text, str) else (node.key or "")
            return
        for index in sorted(children):  # the children as the page placed them
            yield from walk(children[index])

    return list(walk(at.main))


def logit_diffs(at) -> tuple[float, float]:
    values = {m.label: float(m.value) for m in at.metric if "counterfactual" in m.label or "Logit difference" in m.label}
    clean = next(v for label, v in values.items() if label.startswith("Logit difference"))
    return clean, values["…on the counterfactual"]


def no_flip_warnings(at) -> list[str]:
    return [shown(w.value) for w in at.warning if "does not flip the answer" in shown(w.value)]


def test_a_counterfactual_that_leaves_the_answer_is_said_first_and_the_ranking_is_no_finding():
    at = app_on(model=str(zoo_path("base_long")))
    at.query_params["coref_text"] = SENTENCE
    at.run()
    at.switch_page(page_path("heads")).run()
    no_errors(at)
    causal_run(at)
    clean, corrupt = logit_diffs(at)
    assert clean > 0 and corrupt > 0  # the proposed she → he pair: the model names Mary on both
    [warning] = no_flip_warnings(at)
    assert f"{clean:+.3f} on the sentence" in warning and f"{corrupt:+.3f} on the counterfactual" in warning
    assert "prefers Mary on both" in warning
    order = in_order(at)
    first_warning = next(i for i, (kind, text) in enumerate(order) if kind == "Warning" and "does not flip" in text)
    first_metric = next(i for i, (kind, text) in enumerate(order) if kind == "Metric" and "Logit difference" in text)
    first_table = next(i for i, (kind, text) in enumerate(order) if text.startswith("**Every head**"))
    assert first_warning < first_metric < first_table
    captions = [c.value for c in at.caption]
    assert not any(c.startswith("Top heads by patching") for c in captions)
    assert any(c.startswith("Largest patching effects (they move the logit difference; the answer does not flip)")
               for c in captions)

    request = at.session_state["_causal_last_run"]
    measured = next(shown(c.value) for c in at.caption if shown(c.value).startswith("Measured at the last token of"))
    tail = re.match(r"Measured at the last token of “…(.*?)”", measured).group(1)
    assert request.clean.endswith(" " + tail)  # whole words: cut at a space, not inside a word
    corrupt_key = next(w.key for w in at.text_input if w.key and w.key.startswith("causal_corrupt_"))
    flipping = request.corrupt[:request.corrupt.index(". ") + 2] + FLIPPING_END
    at.text_input(key=corrupt_key).input(flipping).run()
    no_errors(at)
    causal_run(at)
    clean, corrupt = logit_diffs(at)
    assert clean > 0 > corrupt
    assert not no_flip_warnings(at)
    assert any(c.value.startswith("Top heads by patching: L") for c in at.caption)


@pytest.mark.parametrize("spearman, shown", [(0.996, "+0.996"), (0.42, "+0.42"), (1.0, "+1.00"), (None, "undefined")])
def test_an_agreement_is_shown_with_the_digits_it_needs(spearman, shown):
    figure = causal_results._figure({"spearman": spearman, "top_k_overlap": 0.9, "k": 10})
    assert figure == f"rank correlation (Spearman) {shown}, top-10 overlap 9/10"
