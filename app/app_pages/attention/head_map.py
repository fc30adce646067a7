"""One head's attention map: the layer/head/hide-sink widgets, the map (pooled with an exact region when
the prompt is long), and the head's metrics."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import big_maps, charts
from app.ui import state
from app.ui.widgets import bounded_slider
from txviz.analysis.heads import METRICS, hide_sink


def head_map(view) -> tuple[int, int, bool]:
    """The layer/head/hide-sink widgets and the chosen head's map (pooled, with an exact region, when long)."""
    config, tokens, table = view.config, view.tokens, view.table
    c1, c2, c3 = st.columns([2, 1, 1])
    bounded_slider(c1, "Layer", 0, view.n_layers - 1, key="layer")
    c2.number_input("Head", 0, config.n_heads - 1, key="head")
    hide = c3.toggle("Hide sink", key="hide_sink",
                     help="Drop the weight on the first token and renormalize the rest of each row.")
    layer, head = int(state.get("layer")), int(state.get("head"))
    kv_head = head // config.n_groups
    title = (f"Layer {layer}, head {head} (shares KV head {kv_head} with {config.n_groups - 1} other"
             f"{'s' if config.n_groups != 2 else ''})" if config.n_groups > 1 else f"Layer {layer}, head {head}")
    if not view.big:
        probs = view.traced.trace.attn(layer, head)
        drawn = hide_sink(probs) if hide else probs
        st.plotly_chart(charts.attention_heatmap(drawn.numpy(), tokens, tokens, title=title), key="heatmap")
    else:
        _pooled_map(view, layer, head, hide, title)
    row = table[(table["layer"] == layer) & (table["head"] == head)].iloc[0]
    st.caption(" · ".join(f"{m} {row[m]:.3f}" for m in METRICS if row[m] is not None and row[m] == row[m]))
    return layer, head, hide


def _pooled_map(view, layer: int, head: int, hide: bool, title: str) -> None:
    """The whole map pooled (the largest weight per block), and the exact weights of a region."""
    n, tokens = view.n, view.tokens
    pooled, block = cache.get_map_overview(view.source, view.prompt, view.bos, layer, head, hide)
    st.plotly_chart(big_maps.pooled_attention(pooled, block, n, title=title), key="heatmap")
    size = min(64, n)
    r1, r2 = st.columns(2)
    q0 = r1.number_input("Region: first query", 0, n - size, n - size, step=size // 2, key="region_query")
    k0 = r2.number_input("Region: first key", 0, n - size, max(0, int(q0) - size // 2), step=size // 2,
                         key="region_key")
    q0, k0 = int(q0), int(k0)
    rows = view.traced.trace.attn(layer, head, rows=slice(q0, q0 + size))  # exact weights, only these rows
    rows = hide_sink(rows) if hide else rows
    st.plotly_chart(big_maps.attention_region(rows[:, k0:k0 + size].numpy(), tokens[q0:q0 + size],
                                            tokens[k0:k0 + size], q_offset=q0, k_offset=k0,
                                            title=f"Exact weights: queries {q0}–{q0 + size - 1} × keys {k0}–{k0 + size - 1}"),
                    key="heatmap_region")
    st.caption(f"The whole {n:,} × {n:,} map is drawn as {pooled.shape[0]} × {pooled.shape[1]} cells "
               f"(the largest weight in each {block} × {block} block); the region below it shows the exact "
               "weights of the rows and keys you pick.")
