"""The Attention page on a prompt past TXVIZ_MAX_TOKENS: cost-aware capture (summaries + q/k, maps
rebuilt one head at a time), a pooled overview and an exact region, and every number equal to what the
full eager trace of the same prompt gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from txviz.capture.pooling import pool_attention
from tests.helpers.apptest import MAIN, chart, decode, no_errors, shown
from txviz.analysis.heads.metrics import head_table, hide_sink
from txviz.capture.cost import SUMMARY_CAPTURE, capture_cost, choose_capture
from txviz.capture.trace import trace

pytestmark = pytest.mark.default_model

TEXT = (__import__("pathlib").Path(MAIN).parents[1] / "assets" / "texts" / "how_a_model_reads.txt").read_text()


@pytest.fixture(scope="module")
def long_prompt(default_model):
    """373 tokens of the shipped text (past the 256 drawn cell by cell, so the overview is pooled, and
    long enough that keeping q/k costs less than fp16 maps: ``summaries_budget`` checks the page's plan; for
    SmolLM2 from about 340 tokens on, since maps are written block by block into their storage and no whole
    T×T temporary adds to their peak) and their full trace. Twice that costs ~3x (the maps grow with T²)."""
    tokenizer = default_model.tokenizer
    prompt = TEXT[:1800]
    ids = tokenizer.encode(prompt, bos="sink").ids
    full = trace(default_model.model, torch.tensor(ids), capture=("attn_probs",))
    return prompt, ids, full


def summaries_budget(config, n_tokens: int) -> int:
    """A memory budget between the summaries plan and the cheapest stored-maps plan: the page must
    choose summaries with maps rebuilt on demand."""
    summaries = capture_cost(config, n_tokens, SUMMARY_CAPTURE)
    plan = choose_capture(config, n_tokens, summaries.peak_bytes)
    assert plan.capture == SUMMARY_CAPTURE
    return summaries.peak_bytes


def test_long_prompt_uses_summaries_and_equals_the_full_trace(default_model, default_model_home, long_prompt,
                                                              monkeypatch):
    from streamlit.testing.v1 import AppTest

    prompt, ids, full = long_prompt
    n = len(ids)
    assert 256 < n < 512  # pooled 2 × 2 in the overview
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    monkeypatch.setenv("TXVIZ_MAX_TOKENS", "64")  # the shared full-map trace refuses it
    monkeypatch.setenv("TXVIZ_MEMORY_BUDGET", str(summaries_budget(default_model.config, n)))
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["prompt"] = prompt
    at.query_params["layer"] = "3"
    at.run()
    no_errors(at)
    info = " ".join(i.value for i in at.info)
    assert f"{n:,}² × 4 bytes" in info and "rebuilt on demand from q_rot/k_rot" in info
    assert not at.warning, [w.value for w in at.warning]
    assert f"**{n:,} tokens**" in " ".join(c.value for c in at.sidebar.caption)  # counted past TXVIZ_MAX_TOKENS

    # every head's metrics come from per-row summaries: equal to the metrics of the full maps
    expected = {(r["layer"], r["head"]): r for r in head_table(full["attn_probs"][:, 0], full.ids[0], full.layers)}
    shown = at.dataframe[0].value  # the only table on the page: every head
    assert len(shown) == len(expected)
    for row in shown.to_dict("records"):
        for metric, value in expected[(row["layer"], row["head"])].items():
            if value is None:
                assert row[metric] is None or row[metric] != row[metric]
            else:
                assert row[metric] == pytest.approx(value, abs=2e-5), (row["layer"], row["head"], metric)

    for head in (0, 5):  # KV heads 0 and 1 (5 // 3); 5 % 3 would be 2, so a grouping bug shows
        at.number_input(key="head").set_value(head).run()
        no_errors(at)
        probs = full.attn(3, head).numpy()
        overview = chart(at, "heatmap")
        assert f"Layer 3, head {head}" in overview["layout"]["title"]["text"]
        pooled, block = pool_attention(probs)
        assert block == -(-n // 256)  # at most 256 cells a side
        np.testing.assert_allclose(decode(overview["data"][0]["z"]).astype(float), pooled, atol=1e-5)

        region = chart(at, "heatmap_region")["data"][0]  # the last 64 queries by default, exact
        z = decode(region["z"]).astype(float)
        q0, k0 = n - 64, n - 64 - 32
        future = np.arange(k0, k0 + 64)[None, :] > np.arange(q0, q0 + 64)[:, None]
        np.testing.assert_allclose(np.where(future, np.nan, z), np.where(future, np.nan, probs[q0:, k0:k0 + 64]),
                                   atol=1e-5)
        assert region["y"][0].startswith(f"{q0}:")

    at.toggle(key="hide_sink").set_value(True).run()  # without the sink, band by band, as on the whole map
    no_errors(at)
    pooled, _ = pool_attention(hide_sink(full.attn(3, head)).numpy())  # the last head shown
    np.testing.assert_allclose(decode(chart(at, "heatmap")["data"][0]["z"]).astype(float), pooled, atol=1e-5)
    at.toggle(key="hide_sink").set_value(False).run()

    at.number_input(key="region_query").set_value(100).run()  # move the region: its exact weights follow
    at.number_input(key="region_key").set_value(0).run()
    no_errors(at)
    z = decode(chart(at, "heatmap_region")["data"][0]["z"]).astype(float)
    np.testing.assert_allclose(z[:, :1], full.attn(3, head).numpy()[100:164, :1], atol=1e-5)  # the sink column
    at.session_state["steps_open"] = True
    at.run()
    assert "Step by step draws every intermediate" in " ".join(i.value for i in at.info)


def test_the_page_refuses_past_the_long_limit_and_names_it(default_model_home, monkeypatch, long_prompt):
    from streamlit.testing.v1 import AppTest

    prompt, ids, _ = long_prompt
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    monkeypatch.setenv("TXVIZ_MAX_LONG_TOKENS", "200")
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["prompt"] = prompt
    at.run()
    no_errors(at)
    assert f"{len(ids)} tokens; this server runs at most 200 (TXVIZ_MAX_LONG_TOKENS)" in " ".join(
        shown(w.value) for w in at.warning)


def test_a_budget_for_some_layers_keeps_the_leading_ones_and_the_page_stays_inside(
        default_model, default_model_home, long_prompt, monkeypatch):
    from streamlit.testing.v1 import AppTest

    prompt, ids, full = long_prompt
    budget = capture_cost(default_model.config, len(ids), SUMMARY_CAPTURE, layers=range(10)).peak_bytes
    monkeypatch.setenv("TXVIZ_HOME", str(default_model_home))
    monkeypatch.setenv("TXVIZ_MAX_TOKENS", "64")
    monkeypatch.setenv("TXVIZ_MEMORY_BUDGET", str(budget))
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["prompt"] = prompt
    at.query_params["layer"] = "20"  # a link made on a bigger budget
    at.run()
    no_errors(at)
    assert "of layers 0–9 only" in " ".join(i.value for i in at.info)
    assert at.slider(key="layer").value == 9 and at.slider(key="layer").max == 9
    assert len(at.dataframe[0].value) == 10 * default_model.config.n_heads
    z = decode(chart(at, "heatmap_region")["data"][0]["z"]).astype(float)
    n = len(ids)
    np.testing.assert_allclose(np.nan_to_num(z[:, -1]), full.attn(9, 0).numpy()[n - 64:, n - 64 - 32 + 63], atol=1e-5)
