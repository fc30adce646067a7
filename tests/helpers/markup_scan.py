"""Find text an AppTest page would render as live markup: every Markdown field of every element (bodies of
markdown, captions and alerts, labels of widgets, expanders, tabs and metrics, tooltips, radio options and
pill labels), the HTML of elements that allow it, and every string of every plotly figure.

Markdown is parsed by a CommonMark parser; on top of it the GitHub autolinks Streamlit's renderer
(remark-gfm) finds in the parsed text after escapes are undone, and Streamlit's ``$math$`` and
``:color[...]`` directives. Plotly reads tags in every label, title and hover text, so a string of a
figure that carries a hostile marker must hold no ``<``."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from html.parser import HTMLParser

from markdown_it import MarkdownIt

MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# remark-gfm's autolink literals (mdast-util-gfm-autolink-literal), with JavaScript's ASCII-only \w
URL_LITERAL = re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE | re.ASCII)
EMAIL_LITERAL = re.compile(r"(?<![-.\w+])([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII)
MARKDOWN_FIELDS = {"body", "label", "help", "caption", "content"}  # Streamlit renders these as Markdown
HTML_TAGS_ALLOWED = {"style", "div", "span", "sub"}  # the token strip's own tags


def live_markdown(body: str) -> list[str]:
    """What in ``body`` would render as a link, image, HTML, emphasis of a marker, math or a directive."""
    found = []
    for block in MD.parse(body):
        if block.type == "html_block":
            found.append(f"HTML block {block.content[:60]!r}")
        run = []
        for child in (block.children or []) + [None]:
            if child is not None and child.type in ("text", "text_special"):
                run.append(child.content)
                continue
            joined = "".join(run)
            run = []
            for pattern in (URL_LITERAL, EMAIL_LITERAL):
                found += [f"autolink {m.group(0)!r}" for m in pattern.finditer(joined)]
            if child is not None and child.type in ("link_open", "image", "html_inline"):
                found.append(f"{child.type} {child.attrs or child.content!r}")
    rendered = MD.render(body)
    found += [f"emphasis {m.group(0)!r}" for m in re.finditer(r"<(em|strong|s)>(EMX|EMY)</\1>", rendered)]
    found += [f"math {m.group(0)!r}" for m in re.finditer(r"(?<!\\)\$MTH", body)]
    found += [f"directive {m.group(0)!r}" for m in re.finditer(r"(?<!\\):red\\?\[", body)]
    return found


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def live_html(body: str) -> list[str]:
    """Tags in an element that allows HTML other than the ones the page itself writes."""
    parser = _Tags()
    parser.feed(body)
    return [f"tag <{tag}>" for tag in parser.tags if tag not in HTML_TAGS_ALLOWED]


def live_plotly(spec: str, markers: tuple[str, ...]) -> list[str]:
    found = []

    def walk(value):
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and "<" in value and any(m in value for m in markers):
            found.append(f"plotly text {value[:80]!r}")

    walk(json.loads(spec))
    return found


def _strings(message, path=""):
    """(field path, text) of every string field, repeated or nested, of a protobuf message."""
    for field, value in message.ListFields():
        where = f"{path}.{field.name}"
        items = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        for item in items:
            if isinstance(item, str):
                yield field.name, where, item
            elif hasattr(item, "ListFields"):
                yield from _strings(item, where)


def scan(at, markers: tuple[str, ...]) -> list[str]:
    """Every piece of live markup on the page ``at`` last drew, with the element it is in."""
    found = []
    for node in _nodes(at._tree):
        proto = getattr(node, "proto", None)
        if proto is None or not hasattr(proto, "ListFields"):
            continue
        kind = proto.DESCRIPTOR.name
        for name, where, text in _strings(proto):
            if kind == "PlotlyChart" and name == "spec":
                problems = live_plotly(text, markers)
            elif kind == "Markdown" and name == "body" and proto.allow_html:
                problems = live_html(text)
            elif name in MARKDOWN_FIELDS or (kind == "Radio" and name == "options"):
                problems = live_markdown(text)
            else:
                continue
            found += [f"{kind}{where}: {problem} in {text[:120]!r}" for problem in problems]
    return found


def _nodes(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _nodes(child)
