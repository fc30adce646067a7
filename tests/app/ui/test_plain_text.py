"""``widgets.plain``: text from outside (an uploaded config's ``_name_or_path``, a file or directory name)
rendered by a CommonMark parser comes back as the same text, with no link, emphasis, heading, HTML or
entity made of it (a name was once rendered bold with a live link)."""

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
    assert html.unescape(rendered[3:-4]).replace("\u2060", "") == re.sub(r"[\r\n]", " ", text)  # joiners: invisible


def test_plain_leaves_words_alone():
    assert plain("Gemma 3 270M") == "Gemma 3 270M" and plain("SmolLM2-135M") == "SmolLM2\\-135M"


@pytest.mark.parametrize("text", ["see http://x.example/a", "HTTPS://X.EXAMPLE", "www.x.example", "WWW.x.example",
                                  "a@b.example", "mailto:a@b.example"])
def test_plain_text_is_no_github_autolink(text):
    """remark-gfm (Streamlit's Markdown) finds autolinks in the text after escapes are undone: the shown
    text, with the invisible word joiners left out, is the input, and matches none of its patterns."""
    from tests.helpers.markup_scan import live_markdown

    assert live_markdown(text) and not live_markdown(plain(text))
    rendered = MarkdownIt("commonmark").render(plain(text)).strip()
    assert html.unescape(rendered[3:-4]).replace("\u2060", "") == text


def test_plain_shows_bidirectional_controls_as_escapes():
    assert plain("a\u202eb\u2066c") == "a\\\\u202eb\\\\u2066c"  # shown as a\u202eb\u2066c, nothing reordered
