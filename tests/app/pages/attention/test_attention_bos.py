"""The Attention page warns when the sidebar puts nothing before the prompt of a model whose own tokenizer
always starts with BOS (once only the Heads page did), with the same words
(app.ui.widgets.missing_bos_warning), and the warning goes when a first token is put back. On a tiny
Gemma-3-shaped GGUF under Gemma 3 270M's file name, whose tokenizer says add_bos_token as Gemma's does."""

from __future__ import annotations

from tests.helpers.apptest import app_on, no_errors
from tests.helpers.gemma_standin import gemma_home  # noqa: F401  (a fixture)
from txviz.lab.corpus import sample_text
from txviz.loading.zoo import SHIPPED_ZOO

SAID = "tokenizer always starts with `<bos>`: without it the first word becomes the attention sink"


def bos_warnings(at) -> list[str]:
    return [w.value for w in at.warning if "always starts with" in w.value]


def choose(at, policy: str):
    return at.sidebar.radio(key="bos").set_value(policy).run()


def test_gemma_without_its_bos_is_warned_until_a_first_token_is_back(gemma_home):
    at = app_on("gemma3-270m", "the cat sat on the mat").run()
    no_errors(at)
    assert at.session_state["bos"] == "sink" and not bos_warnings(at)
    at = choose(at, "none")
    no_errors(at)
    assert len(bos_warnings(at)) == 1 and SAID in bos_warnings(at)[0]
    assert "Policy before the prompt: **no extra token**" in " ".join(c.value for c in at.caption)
    at = choose(at, "sink")
    no_errors(at)
    assert not bos_warnings(at)


def test_a_model_whose_tokenizer_adds_nothing_is_not_warned():
    at = app_on(str(SHIPPED_ZOO / "base"), sample_text(3)).run()
    at = choose(at, "none")
    no_errors(at)
    assert not bos_warnings(at)
