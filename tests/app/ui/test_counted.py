"""``widgets.counted``: a count in words, singular for one (not "1 KV heads (MQA)")."""

from __future__ import annotations

from app.ui.widgets import counted


def test_one_is_singular_and_the_rest_plural():
    assert [counted(n, "KV head") for n in (0, 1, 2, 1024)] == ["0 KV heads", "1 KV head", "2 KV heads",
                                                               "1,024 KV heads"]
