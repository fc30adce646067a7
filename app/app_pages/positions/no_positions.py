"""The "No positions: the causal mask" tab: without any position scheme, a query at i still sees
exactly i + 1 keys, so how diluted its attention is tells its position (Haviv et al. 2022)."""

from __future__ import annotations

import streamlit as st

from app.app_pages.positions.view import PositionsView
from app.figures import charts
from txviz.analysis.positions import measured as pos


def mask_tab(view: PositionsView) -> None:
    config, tokens, layer = view.config, view.tokens, view.layer
    st.markdown("This model has **no position scheme**: no rotation, no bias, no position vector. The causal mask "
                "is the only source of order: a query at i sees i + 1 keys, so a head that spreads its attention "
                "evenly averages over more tokens the later it is. Its attention entropy can reach log(i + 1), and "
                "the model can read its position from how diluted that average is (Haviv et al. 2022).")
    probs = view.traced.trace.get("attn_probs", layer)[0]  # (H, T, S)
    entropy = pos.row_entropy(probs)  # (H, T)
    series = {f"head {h}": entropy[h].numpy() for h in range(config.n_heads)}
    series["log(i + 1): even over all visible keys"] = pos.uniform_entropy(len(tokens)).numpy()
    st.plotly_chart(charts.lines(range(len(tokens)), series, title=f"Layer {layer}: attention entropy per query position",
                                 x_title="query position i", y_title="nats"), key="nopos_entropy")
    if len(tokens) > 1:
        share = pos.entropy_share(entropy)  # (H,)
        st.caption(f"In layer {layer} the heads reach {float(share.min()):.0%}–{float(share.max()):.0%} of the "
                   "even-spread entropy summed over the prompt: the closer to 100 %, the more a head's output is an "
                   "average whose dilution tells the position.")
    st.plotly_chart(charts.attention_heatmap(probs[view.head].numpy(), tokens, tokens,
                                             title=f"Layer {layer} head {view.head}"), key="nopos_map")
