"""``widgets.plain``: text from outside (an uploaded config's ``_name_or_path``, a file or directory name)
rendered by a CommonMark parser comes back as the same text, with no link, emphasis, heading, HTML or
entity made of it (QA finding 6: a name rendered bold with a live link)."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from app.ui.widgets import plain

HOSTILE = [
    "<img src=x onerror=alert(1)> **bold** [link](http://x)",
    "meta-llama/Llama-3-8B_*draft*_ `code` ~~gone~~ $x^2$ :red[alarm] &amp; &lt;b&gt;",
    "# heading\n- item\n1. first\n> quote",
    "a | b\n--|--\nc | d",
    "![image](http://x/y.png) <http://x> [ref]\n\n[ref]: http://x",
    "back\\slash\\*still\\",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_text_renders_as_written(text):
    rendered = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(plain(text)).strip()
    assert rendered.startswith("<p>") and rendered.endswith("</p>") and "<" not in rendered[3:-4], rendered
    assert html.unescape(rendered[3:-4]) == re.sub(r"[\r\n]", " ", text)


def test_plain_leaves_words_alone():
    assert plain("Gemma 3 270M") == "Gemma 3 270M" and plain("SmolLM2-135M") == "SmolLM2\\-135M"
