"""The Tradeoffs page's "Dense vs MoE" chart: every point is named by what it is. The one-expert point is
the dense FFN (no router, one FFN per token), not a top-k point, and a point with fewer experts than the
model's k routes to all of them: each label gives the k that point's FLOPs were counted with."""

from __future__ import annotations

import pytest

from tests.helpers.apptest import chart, decode, no_errors, open_at
from txviz.loading.zoo import SHIPPED_ZOO, read_txviz_config
from txviz.model.counts import flops_per_token

pytestmark = pytest.mark.skipif(not (SHIPPED_ZOO / "moe_top2").is_dir(), reason="the zoo is not shipped")


@pytest.mark.parametrize("variant", ["base", "moe_top2"])
def test_each_point_of_the_expert_family_is_labelled_with_the_routing_it_was_counted_with(variant):
    at = open_at("tradeoffs", str(SHIPPED_ZOO / variant), "Mary had a red kite.",
                 state={"tradeoffs_tab": "Dense vs MoE"})
    no_errors(at)
    config = read_txviz_config(SHIPPED_ZOO / variant)
    context = config.max_seq_len // 2
    (points,) = chart(at, "to_moe_family")["data"]
    flops = decode(points["x"]).astype(float)
    dense = flops_per_token(config.replace(n_experts=0), context)
    for label, x in zip(points["text"], flops):
        if label == "dense":
            assert x == dense
            continue
        experts, k = label.removeprefix("E=").split(", top-")
        routed = config.replace(n_experts=int(experts), top_k=int(k))
        assert x == flops_per_token(routed, context), label
    assert points["text"].count("dense") == 1 and not any(t.startswith("E=1,") for t in points["text"])
