"""The MoE and Tradeoffs pages state what the zoo's numbers support, in words computed from them:
top-2 routing barely collapses, and the MHA/GQA/MQA losses differ by less than their noise (drawn with
error bars on an axis that does not zoom into it)."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import chart, click_tab, decode, no_errors, open_at, texts
from txviz.loading.zoo import SHIPPED_ZOO

MOE = ("moe_top1", "moe_top1_balanced", "moe_top2", "moe_top2_balanced")
KINDS = ("mha", "base", "mqa")

pytestmark = pytest.mark.skipif(not all((SHIPPED_ZOO / n / "eval.json").is_file() for n in MOE + KINDS),
                                reason="the zoo's MoE and attention variants are not trained")


def open_page(page: str, tab: str | None = None, label: str | None = None):
    """``page`` opened on its tab ``label`` (``tab`` being the tabs' key; none: the first tab), as a click on
    the tab shows it."""
    at = open_at(page, str(SHIPPED_ZOO / "base"), "Mary had a red kite.", timeout=300,
                 state={tab: label} if tab else None)
    no_errors(at)
    return at


def test_moe_page_says_top1_collapses_and_top2_barely_does_with_the_measured_numbers():
    at = open_page("moe", "moe_tab", "Balanced vs unbalanced")
    words = texts(at)
    top1 = next(line for line in words.splitlines() if "Top-1 routing" in line)
    top2 = next(line for line in words.splitlines() if "Top-2 routing" in line)
    assert "**collapses**" in top1 and "**barely collapses**" in top2
    table = next(d.value for d in at.dataframe if "effective experts (mean)" in d.value.columns).set_index("variant")
    effective = table["effective experts (mean)"]  # the top-1 pair, measured on the same held-out tokens
    assert f"{effective['moe_top1']:.2f} effective experts of 4" in top1
    assert f"against {effective['moe_top1_balanced']:.2f} with it" in top1
    at.segmented_control(key="moe_pair").set_value("top-2").run()
    table = next(d.value for d in at.dataframe if "effective experts (mean)" in d.value.columns).set_index("variant")
    assert f"{table['effective experts (mean)']['moe_top2']:.2f} effective experts of 4" in top2


def test_tradeoffs_page_calls_the_attention_kinds_gap_noise_and_draws_it_honestly():
    at = open_page("tradeoffs", "tradeoffs_tab", "MHA / GQA / MQA")
    words = texts(at)
    assert "within evaluation noise" in words and "one seed" in words
    spec = chart(at, "to_kv_zoo")
    points = spec["data"][0]
    losses = decode(points["y"]).astype(float)
    errors = decode(points["error_y"]["array"]).astype(float)
    assert sorted(points["text"]) == sorted(KINDS) and (errors > 0).all()
    low, high = spec["layout"]["yaxis"]["range"]
    assert high - low >= 0.05 * losses.max() - 1e-9  # a 0.1 % gap is not stretched over the whole axis
    assert losses.max() - losses.min() < (errors / 2).max() * 2  # the gap is inside 2 standard errors


def open_tab(at, label: str):
    return click_tab(at, "tradeoffs_tab", label)


def test_tradeoffs_tabs_run_only_when_open_and_each_says_its_noise():
    at = open_page("tradeoffs")
    ids = [el.proto.id for el in at.get("plotly_chart")]
    assert any("to_depth_flops" in i for i in ids) and not any("to_kv_zoo" in i or "to_ctx" in i for i in ids)
    depth = texts(at)
    assert "The losses of deep_narrow, base, shallow_wide" in depth and "within evaluation noise" in depth
    moe_tab = texts(open_tab(at, "Dense vs MoE"))
    assert "larger than evaluation noise" in moe_tab and "another seed" in moe_tab  # MoE gaps exceed the noise
    assert "error_y" in chart(at, "to_moe_zoo")["data"][0]
    for label in ("Context length", "FlashAttention", "Parallel vs sequential", "Positions beyond training"):
        open_tab(at, label)
