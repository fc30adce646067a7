"""The MoE page computes only the open tab; the zoo variant that the routing and cost tabs show is
chosen above the tabs, so the cost tab follows it without the routing tab running, and the choices
made on a tab survive a visit to another."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import chart, click_tab, has_chart, no_errors, open_at
from txviz.loading.zoo import SHIPPED_ZOO

MOE = ("moe_top1", "moe_top1_balanced", "moe_top2", "moe_top2_balanced")

pytestmark = pytest.mark.skipif(not all((SHIPPED_ZOO / n / "eval.json").is_file() for n in MOE + ("base",)),
                                reason="the zoo's MoE variants are not trained")


def moe_page(tab: str | None = None):
    """The MoE page on a dense model, open on its first tab or on ``tab`` (as a click on that tab shows it)."""
    at = open_at("moe", str(SHIPPED_ZOO / "base"), "Mary had a red kite.", timeout=300,  # a dense model
                 state={"moe_tab": tab} if tab else None)
    no_errors(at)
    return at


def open_tab(at, label: str):
    return click_tab(at, "moe_tab", label)


def balance_table(at):
    return next((d.value for d in at.dataframe if "effective experts (mean)" in d.value.columns), None)


def test_only_the_open_tab_is_computed():
    at = moe_page()
    assert has_chart(at, "moe_map")  # the routing tab, open by default
    assert balance_table(at) is None and not has_chart(at, "moe_family") and not has_chart(at, "moe_effective")
    open_tab(at, "Capacity vs compute")
    assert has_chart(at, "moe_family")
    assert not has_chart(at, "moe_map") and balance_table(at) is None
    open_tab(at, "Balanced vs unbalanced")
    assert balance_table(at) is not None and not has_chart(at, "moe_map") and not has_chart(at, "moe_family")


def test_the_cost_tab_follows_the_variant_chosen_above_the_tabs():
    at = moe_page("Capacity vs compute")
    variant = at.selectbox(key="moe_variant")
    first = variant.value
    assert chart(at, "moe_family")["layout"]["title"]["text"].startswith(first)  # zoo configs are named after it
    other = "moe_top2" if first != "moe_top2" else "moe_top1"
    variant.set_value(other).run()
    no_errors(at)
    assert chart(at, "moe_family")["layout"]["title"]["text"].startswith(other)
    assert not has_chart(at, "moe_map")  # the routing tab did not run for it
    open_tab(at, "Routing on a text")
    assert chart(at, "moe_map")["layout"]["title"]["text"].startswith(f"{other}:")


def test_a_tab_keeps_its_choices_while_another_is_open():
    at = moe_page("Balanced vs unbalanced")
    at.segmented_control(key="moe_pair").set_value("top-2").run()
    open_tab(at, "Routing on a text")
    at.radio(key="moe_text").set_value("sidebar prompt").run()
    open_tab(at, "Balanced vs unbalanced")
    assert list(balance_table(at)["variant"]) == ["moe_top2", "moe_top2_balanced"]
    open_tab(at, "Routing on a text")
    assert at.radio(key="moe_text").value == "sidebar prompt"
