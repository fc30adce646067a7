"""The Decoding page's "Branch from step N" line names the step's token as it reads: the token's label is
Markdown with its punctuation escaped, which a code span would show backslash and all (chromium read
"instead of \\'t")."""

from __future__ import annotations

import re

import pytest

from app.ui.widgets import MARKDOWN_SIGNS
from tests.helpers.apptest import no_errors, open_at, shown
from txviz.lab.corpus import sample_text
from txviz.loading.zoo import SHIPPED_ZOO

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "base").is_dir(), reason="the zoo is not shipped")


def test_the_branch_line_shows_a_punctuation_token_without_backslashes():
    at = open_at("decoding", model=str(SHIPPED_ZOO / "base"), prompt=sample_text(3), timeout=300)
    at.session_state["dec_new"] = 12
    at.run()
    at.button(key="dec_generate").click().run()
    no_errors(at)
    run = next(iter(at.session_state["_decodings"].values()))
    step = next(i for i, s in enumerate(run.steps) if any(c in MARKDOWN_SIGNS for c in (s.token.text or "")))
    at.session_state["dec_step"] = step
    at.run()
    no_errors(at)
    line = next(m.value for m in at.markdown if m.value.startswith(f"**Branch from step {step}:**"))
    assert not any("\\" in span for span in re.findall(r"`([^`]*)`", line)), line  # no escape left visible
    assert run.steps[step].token.text.strip() in shown(line)
