"""Widgets whose ranges come from the model or the limits, so they hold for any model and setting; text
from outside (an uploaded file's names, a path) shown as written; counts in words ("1 KV head") and bytes as read ("4 B"); the warning for a prompt
without the BOS its model's tokenizer always adds."""

from __future__ import annotations

import re
import string

import streamlit as st

from app.ui import state
from txviz.loading.tokenizer.token_text import visible_controls

MARKDOWN_SIGNS = frozenset(string.punctuation)  # CommonMark lets a backslash escape every ASCII punctuation sign
# GitHub's autolinks are found in the text after escapes are undone (remark-gfm rewrites the parsed text,
# as Streamlit's Markdown does): "http\\:\\/\\/x" is still "http://x" there and becomes a link. A word joiner
# (U+2060, invisible, no line break) inside each trigger keeps it from matching.
WORD_JOINER = "\u2060"
AUTOLINK_TRIGGERS = re.compile(r"(?<=:)(?=//)|(?i:(?<=www))(?=\.)|(?<=@)")


def plain(text: str) -> str:
    """``text`` as written inside Markdown: every ASCII punctuation sign escaped, so ``*``/``_`` emphasis,
    ``[links](...)``, HTML, entities and ``:red[...]`` directives stay text; a word joiner inside each
    ``://``, ``www.`` and ``@``, so a bare ``http://``, ``www.`` or e-mail address is no autolink; a line
    break becomes a space (it would start a list or heading); a bidirectional control character is shown
    as its escape (it would reorder the words after it)."""
    text = AUTOLINK_TRIGGERS.sub(WORD_JOINER, visible_controls(str(text)))
    return "".join(f"\\{c}" if c in MARKDOWN_SIGNS else " " if c in "\r\n" else c for c in text)


def percent_change(fraction: float, *, lower_is_better: bool = False) -> dict:
    """``st.metric``'s delta arguments for a relative change: "+12%" coloured by whether the change is
    good; a change that reads 0% gets no arrow and no colour ("+0%" in red with an up arrow alarms over
    nothing)."""
    text = f"{fraction * 100:+.0f}%"
    if text in ("+0%", "-0%"):
        return {"delta": "0% (no change)", "delta_color": "off", "delta_arrow": "off"}
    return {"delta": text, "delta_color": "inverse" if lower_is_better else "normal"}


def clip_words(text: str, limit: int, *, keep: str = "start") -> str:
    """``text`` shortened to about ``limit`` characters at a word boundary, "…" where it was cut: its
    start (``keep="start"``) or its end (``keep="end"``) kept, never half a word."""
    if len(text) <= limit:
        return text
    if keep == "end":
        part = text[-(limit + 1):]
        space = part.find(" ")
        return "…" + (part[space + 1:] if 0 <= space < len(part) - 1 else text[-limit:]).lstrip()
    part = text[:limit + 1]
    space = part.rfind(" ")
    return (part[:space] if space > 0 else text[:limit]).rstrip() + "…"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, singular for one: "1 KV head", "8 KV heads"."""
    return f"{n:,} {noun}{'s' * (n != 1)}"


def byte_size(n: int) -> str:
    """A byte count as read: whole bytes below a KiB ("4 B", not "0.0 KiB"), else KiB to one decimal."""
    return f"{n:,} B" if n < 1024 else f"{n / 1024:,.1f} KiB"


def limit_text(n_bytes: int) -> str:
    """An upload limit as a label says it: in MiB from one MiB up ("1 MiB"), else in KiB."""
    return f"{n_bytes / 2**20:g} MiB" if n_bytes >= 2**20 else f"{n_bytes / 1024:g} KiB"


def missing_bos_warning(tokenizer, bos: str) -> None:
    """Warn when the sidebar puts nothing before the prompt of a model whose own tokenizer always starts
    with BOS (Gemma): it never saw text without it in training."""
    if bos == "none" and tokenizer.adds_bos:
        st.warning(f"This model's own tokenizer always starts with `{tokenizer.bos_token}`: without it the first "
                   "word becomes the attention sink and the scores fall (choose 'sink token' or 'BOS').")


def bounded_slider(container, label: str, low: int, high: int, value: int | None = None, *, key: str,
                   **kwargs) -> int:
    """``container.slider`` over [low, high], or a caption when the range holds one value (Streamlit
    refuses min == max: a one-layer model, a limit of one new token)."""
    if high <= low:
        state.put(key, low)
        container.caption(f"{label}: {low}")
        return low
    if value is not None:
        value = min(max(value, low), high)
        return container.slider(label, low, high, value, key=key, **kwargs)
    return container.slider(label, low, high, key=key, **kwargs)


def picked_customdata(event) -> tuple | None:
    """The ``customdata`` of the first point a plotly chart's selection event holds (``st.plotly_chart(...,
    on_select="rerun")`` state), or None. The browser sends a point's customdata array as an object keyed
    "0", "1", …; AppTest and older versions send a list: both come back as a tuple in order."""
    selection = getattr(event, "selection", None) if not isinstance(event, dict) else event.get("selection")
    points = (selection.get("points") if isinstance(selection, dict) else getattr(selection, "points", None)) or []
    if not points or "customdata" not in points[0]:
        return None
    data = points[0]["customdata"]
    if isinstance(data, dict):
        return tuple(data[key] for key in sorted(data, key=int))
    return tuple(data) if isinstance(data, (list, tuple)) else (data,)
