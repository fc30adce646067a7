"""The Decoding page says how many tokens the model reads, which is the run's own prompt (its
``prompt_ids``), and why that is not the sidebar's count of the prompt when the chat template wraps it:
the template's own tokens, and its first token standing in for the BOS the sidebar counts."""

from __future__ import annotations

import re

from tests.helpers.apptest import no_errors, open_at
from tests.helpers.chatml_home import home_with_template  # noqa: F401  (a fixture)

PROMPT = "the the"


def said_read(at) -> int:
    """The number of tokens the page says the model reads."""
    return int(next(re.search(r"The model reads \*\*(\d+) tokens\*\*", c.value).group(1)
                    for c in at.caption if "The model reads" in c.value))


def sidebar_count(at) -> int:
    return int(next(re.search(r"\*\*(\d+) tokens\*\*", c.value).group(1)
                    for c in at.sidebar.caption if re.search(r"\*\*\d+ tokens\*\*", c.value)))


def generated(at):
    at.button(key="dec_generate").click().run()
    no_errors(at)
    return next(reversed(at.session_state["_decodings"].values()))


def tokenizer():
    from app.services.models import load_model

    return load_model("default").tokenizer


def test_the_page_says_the_tokens_the_model_reads_and_why_they_are_not_the_sidebars(home_with_template):
    at = open_at("decoding", prompt=PROMPT, timeout=300)
    at.session_state["dec_new"] = 2
    at.run()
    no_errors(at)
    assert at.toggle(key="dec_chat").value and at.session_state["bos"] == "sink"
    words = tokenizer()
    bare = len(words.encode(PROMPT, bos="none").ids)
    wrapped = generated(at)
    assert said_read(at) == len(wrapped.prompt_ids) > sidebar_count(at) == bare + 1  # the sink, counted by both
    template = len(wrapped.prompt_ids) - bare - 1
    said = " ".join(c.value for c in at.caption)
    assert f"not the sidebar's {sidebar_count(at)}: the chat template wraps the prompt in {template} tokens" in said
    assert wrapped.prompt_ids[0] == words.sink_id and "not put in front a second time" not in said

    at.toggle(key="dec_chat").set_value(False).run()  # the prompt as it is: the sidebar's count
    no_errors(at)
    plain = generated(at)
    assert said_read(at) == len(plain.prompt_ids) == sidebar_count(at) < len(wrapped.prompt_ids)
    assert "the chat template wraps" not in " ".join(c.value for c in at.caption)

    at.session_state["bos"] = "bos"  # the template opens with the BOS: it is read once, as the template's
    at.toggle(key="dec_chat").set_value(True).run()
    no_errors(at)
    once = generated(at)
    assert said_read(at) == len(once.prompt_ids) and sidebar_count(at) == bare + 1
    assert list(once.prompt_ids).count(words.bos_id) == list(wrapped.prompt_ids).count(words.bos_id)
    said = " ".join(c.value for c in at.caption)
    assert (f"wraps the prompt in {len(once.prompt_ids) - bare} tokens of its own" in said
            and "the token the sidebar counts before the prompt, so it is not put in front a second time" in said)
