"""The Tradeoffs page's "Context length" tab on a model with windowed layers (the Gemma 3 stand-in of
tests.helpers.gemma_standin: 15 of 18 layers see 8 keys): the headline T*, the dotted line and the
plotted curves are one computation, so the curves cross where the headline says."""

from __future__ import annotations

import numpy as np

from tests.helpers.apptest import chart, decode, no_errors, open_at, texts
from tests.helpers.gemma_standin import GEMMA_LIKE, gemma_home  # noqa: F401  (a fixture)
from txviz.analysis.tradeoffs import formulas as tr


def test_the_headline_t_star_is_where_the_plotted_curves_cross(gemma_home):
    at = open_at("tradeoffs", "gemma3-270m", "the cat sat", state={"tradeoffs_tab": "Context length"})
    no_errors(at)
    crossover = tr.attention_ffn_crossover(GEMMA_LIKE)
    assert round(crossover) == 392  # (15·8 + 3·T)/18 · 4·4·32 = 3·2·64·96 tokens' FFN FLOPs
    headline = next(m.value for m in at.metric if m.label == "Attention overtakes the FFN at")
    assert headline == f"T* ≈ {crossover:,.0f} tokens"
    figure = chart(at, "to_ctx_flops")
    (line,) = [s for s in figure["layout"]["shapes"] if s.get("line", {}).get("dash") == "dot"]
    assert line["x0"] == line["x1"] == crossover
    series = {s["name"]: decode(s["y"]).astype(float) for s in figure["data"]}
    tokens = decode(figure["data"][0]["x"]).astype(float)
    above = series["attention (QKᵀ, A·V)"] > series["FFN"]
    first = int(np.argmax(above))  # attention stays above once past: the first plotted length past T*
    assert above[first:].all() and not above[:first].any()
    assert tokens[first - 1] < crossover < tokens[first]
    assert "15 of this model's 18 layers see only a window of keys (15 at 8)" in texts(at)
    alone = tr.global_layer_crossover(GEMMA_LIKE)
    assert f"A global layer alone crosses at F/(4·H·d_head) ≈ {alone:,.0f}" in texts(at)
