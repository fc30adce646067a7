"""The tradeoffs tabs measured on this machine, on a tiny zoo model (the fast tier's twin of the
default-model test in test_app.py): nothing runs on opening, a click measures, and the measurement is
kept for the next run and another visitor."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import chart, has_chart, no_errors, open_at
from txviz.loading.zoo import SHIPPED_ZOO

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "base" / "eval.json").is_file(), reason="the zoo's base is not trained")


def tradeoffs_tab(label: str):
    at = open_at("tradeoffs", str(SHIPPED_ZOO / "base"), "Mary had a red kite.", state={"tradeoffs_tab": label})
    no_errors(at)
    return at


def table(at, column: str):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_flash_attention_is_measured_on_a_click_and_kept():
    at = tradeoffs_tab("FlashAttention")
    at.select_slider(key="to_flash_max").set_value(512).run()
    assert not has_chart(at, "to_flash_time") and any("the result is kept" in c.value for c in at.caption)
    at.button(key="to_flash_run").click().run()
    no_errors(at)
    flash = table(at, "SDPA ms")
    assert list(flash["tokens"]) == [128, 256, 512] and (flash["max |naive − SDPA|"] < 1e-4).all()
    assert (flash["SDPA ms"] > 0).all() and len(chart(at, "to_flash_memory")["data"]) == 3
    for method in ("naive", "SDPA"):  # every length repeated: its fastest and slowest run around the median
        for median, spread in zip(flash[f"{method} ms"], flash[f"{method} fastest–slowest ms"]):
            fastest, slowest = map(float, spread.split("–"))
            assert fastest <= median * 1.01 and median <= slowest * 1.01  # shown to 3 digits
    assert flash["noise decides"].dtype == bool and any("the median of 5 runs" in c.value for c in at.caption)
    again = tradeoffs_tab("FlashAttention")  # another session, no click: the measurement is kept
    again.select_slider(key="to_flash_max").set_value(512).run()
    assert list(table(again, "SDPA ms")["tokens"]) == [128, 256, 512]


def test_reading_in_parallel_and_token_by_token_agree():
    at = tradeoffs_tab("Parallel vs sequential")
    assert at.select_slider(key="to_rnn_max").options == ["16", "32", "64", "128"]  # up to the zoo's 128-token context
    at.select_slider(key="to_rnn_max").set_value(16).run()
    assert not has_chart(at, "to_rnn_time")
    at.button(key="to_rnn_run").click().run()
    no_errors(at)
    reading = table(at, "parallel_s")
    assert list(reading["tokens"]) == [4, 8, 16] and (reading["max |Δ last logits|"] < 1e-3).all()
    ratio = reading["sequential_s"] / reading["parallel_s"]
    assert list(ratio.round(6)) == list(reading["sequential ÷ parallel"].round(6))
    assert [trace["name"] for trace in chart(at, "to_rnn_time")["data"]] == ["one parallel pass",
                                                                            "one token at a time (KV cache)"]


def test_each_reading_time_is_a_median_of_several_runs(monkeypatch):
    from txviz.analysis.tradeoffs import timing

    asked, timed = [], timing.timed
    monkeypatch.setattr(timing, "timed", lambda fn, repeats, device: asked.append(repeats) or timed(fn, repeats, device))
    at = tradeoffs_tab("Parallel vs sequential")
    at.select_slider(key="to_rnn_max").set_value(32).run()  # lengths no other test measures: not kept yet
    at.button(key="to_rnn_run").click().run()
    no_errors(at)
    assert len(asked) == 2 * 4 and min(asked) >= 3  # both readings of each of 4, 8, 16 and 32 tokens
    assert any(f"the median of {min(asked)} runs" in c.value for c in at.caption)
