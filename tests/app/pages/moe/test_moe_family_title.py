"""The MoE page's "Capacity vs compute" chart says what its points are: the one-expert point is the dense
FFN (no router), and a point with fewer experts than the model's k routes every token to all of them, so
its FLOPs are not those of k experts."""

from __future__ import annotations

import pytest

from app.app_pages.moe.cost import _family_title
from tests.helpers.apptest import chart, decode, no_errors, open_at
from txviz.analysis.tradeoffs.formulas import expert_family
from txviz.loading.zoo import SHIPPED_ZOO, read_txviz_config

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "moe_top2" / "eval.json").is_file(),
                                reason="the zoo's MoE variants are not trained")


def test_the_chart_names_the_one_expert_point_the_dense_ffn():
    at = open_at("moe", str(SHIPPED_ZOO / "moe_top2"), "Mary had a red kite.", timeout=300,
                 state={"moe_tab": "Capacity vs compute"})
    no_errors(at)
    figure = chart(at, "moe_family")
    series = {s["name"]: decode(s["y"]).astype(float) for s in figure["data"]}
    experts = decode(figure["data"][0]["x"]).astype(float)
    dense = experts == 1
    assert (series["active params"][dense] == series["total params"][dense]).all()  # no expert left idle: dense
    assert "E = 1: the dense FFN" in figure["layout"]["title"]["text"]
    assert "top-2" in figure["layout"]["title"]["text"]


def test_counts_below_k_are_named_as_running_every_expert():
    config = read_txviz_config(SHIPPED_ZOO / "moe_top2").replace(top_k=4)
    family = expert_family(config)
    below = [r for r in family if 1 < r["experts"] < 4]
    assert [r["top_k"] for r in below] == [r["experts"] for r in below] == [2]
    expected = "m with E experts of the same width, top-4 (E = 1: the dense FFN; E = 2: all of them)"
    assert _family_title("m", family) == expected
