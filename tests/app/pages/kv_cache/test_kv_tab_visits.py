"""The KV page's settings across tab visits: a slider set on one tab keeps its
value, and the numbers it drives, after another tab was open in between; on the zoo's tiny base model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.apptest import chart, click_tab, no_errors, open_at
from tests.helpers.spy import spy

ZOO_BASE = str(Path(__file__).resolve().parents[4] / "assets" / "zoo" / "base")


def zoo_prompt() -> str:
    """A prompt the zoo's vocabulary knows (the default prompt's unknown words would add a warning)."""
    from txviz.lab.corpus import sample_text

    return sample_text(3)


def open_tab(at, label: str):
    return click_tab(at, "kv_tab", label)


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def library_report(n_kv_heads: int, tokens: int):
    """The sharing tab's report (cache and perplexity of the variant), computed here by the library on the
    same text."""
    from app.services.texts import shipped_text_ids, shipped_texts
    from app.services.kv_sharing import kv_counterfactual
    from txviz.loading import load

    loaded = load(ZOO_BASE)
    return kv_counterfactual(loaded, n_kv_heads, shipped_text_ids(loaded, next(iter(shipped_texts())), tokens))


def test_every_slider_and_choice_survives_a_visit_to_another_tab(monkeypatch):
    from app import cache
    from app.services.texts import shipped_texts

    asked = spy(monkeypatch, cache, "get_kv_counterfactual")  # what the tab was given to show
    at = open_at("kv_cache", model=ZOO_BASE, prompt=zoo_prompt(), timeout=300, state={"kv_tab": "Sharing KV heads"})
    no_errors(at)
    at.select_slider(key="live_tokens").set_value(128).run()
    at.segmented_control(key="live_kv").set_value(1).run()  # MQA
    no_errors(at)
    text = next(iter(shipped_texts()))
    chosen, report, expected = metrics(at), asked.last, library_report(1, 128)
    assert asked.last_args[1:] == (1, text, 128)
    assert report.kv_bytes_variant == expected.kv_bytes_variant
    assert report.perplexity_variant == pytest.approx(expected.perplexity_variant, rel=1e-5)
    open_tab(at, "Cache growth").slider(key="kv_new_tokens").set_value(5).run()
    open_tab(at, "Cached vs uncached").slider(key="kv_speed_tokens").set_value(9).run()
    open_tab(at, "Memory calculator")
    visits = len(asked.made)
    open_tab(at, "Sharing KV heads")
    assert len(asked.made) > visits and asked.last_args[1:] == (1, text, 128)  # those of 128 tokens, MQA
    assert at.select_slider(key="live_tokens").value == 128
    assert at.segmented_control(key="live_kv").value == 1
    assert metrics(at) == chosen  # the same figures shown
    assert open_tab(at, "Cache growth").slider(key="kv_new_tokens").value == 5
    assert len(chart(at, "kv_growth")["frames"]) == 5  # one per generated token: the five asked for
    assert open_tab(at, "Cached vs uncached").slider(key="kv_speed_tokens").value == 9
