"""Texts shortened for a caption at a word boundary (app.ui.widgets.clip_words)."""

from __future__ import annotations

import pytest

from app.ui.widgets import clip_words

TEXT = "Mary gave the book to John because she was happy. The person who was happy was"


@pytest.mark.parametrize("limit", range(5, len(TEXT) + 2))
def test_the_end_kept_is_whole_words(limit):
    shown = clip_words(TEXT, limit, keep="end")
    if limit >= len(TEXT):
        assert shown == TEXT
    else:
        assert shown.startswith("…") and TEXT.endswith(" " + shown[1:]) and len(shown) <= limit + 1


@pytest.mark.parametrize("limit", range(5, len(TEXT) + 2))
def test_the_start_kept_is_whole_words(limit):
    shown = clip_words(TEXT, limit)
    if limit >= len(TEXT):
        assert shown == TEXT
    else:
        assert shown.endswith("…") and TEXT.startswith(shown[:-1] + " ") and len(shown) <= limit + 1


def test_a_single_long_word_is_cut_where_it_must_be():
    assert clip_words("x" * 50, 40) == "x" * 40 + "…"
    assert clip_words("x" * 50, 40, keep="end") == "…" + "x" * 40
