"""One head's attention map: the layer/head/hide-sink widgets, the map and the head's metrics. With every
map stored, the map is the head maps component (app/components/head_maps): every head of every layer
within the byte budget, switched in the browser; past it the page's layer, and a layer the reader picks
there (or prefetched beside the one painted) is fetched by a rerun of the component's own fragment. A
long prompt's map is drawn pooled, with an exact region of the page's head. The plain chart stays as a
lazy fallback. What the component gets is assembled in app/services/head_maps.py."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.components.head_maps import head_maps
from app.figures import big_maps, charts
from app.services.head_maps import component_view, head_title, layers_blob, maps_plan, metrics_line
from app.ui import state
from app.ui.widgets import bounded_slider, plain
from txviz.analysis.heads.metrics import hide_sink


def head_map(view) -> tuple[int, int, bool]:
    """The layer/head/hide-sink widgets and the chosen head's map (pooled, with an exact region, when long)."""
    config = view.config
    c1, c2, c3 = st.columns([2, 1, 1])
    bounded_slider(c1, "Layer", 0, view.n_layers - 1, key="layer")
    c2.number_input("Head", 0, config.n_heads - 1, key="head")
    hide = c3.toggle("Hide sink", key="hide_sink",
                     help="Drop the weight on the first token and renormalize the rest of each row.")
    layer, head = int(state.get("layer")), int(state.get("head"))
    if view.plan is None:  # every map is stored: whole layers go to the browser
        _browser_maps(view, layer, head, hide)
        if view.big:
            _region(view, layer, head, hide)
        _plain_chart(view, layer, head, hide)
    else:  # a long prompt's maps are rebuilt one head at a time: one head, pooled
        _pooled_map(view, layer, head, hide, head_title(config, layer, head))
        if view.big:
            _region(view, layer, head, hide)
        st.caption(metrics_line(view.table, layer, head))
    if hide and view.bos == "none":
        _no_sink_note(view.tokens[0])
    return layer, head, hide


def _no_sink_note(first: str) -> None:
    """Hide sink with nothing before the prompt drops a word of the prompt, not a sink token: say so."""
    st.caption(f"Nothing is put before the prompt, so the first token, {plain(repr(first))}, is the prompt's own "
               "first word: Hide sink drops its column and renormalizes the rest (row 0 is left empty). Choose "
               "'sink token' or 'BOS' under Before the prompt to hide a token that is only a sink.")


@st.fragment
def _browser_maps(view, layer: int, head: int, hide: bool) -> None:
    """Every head of the layer (of every layer, when they fit the byte budget), switched in the browser.
    A fragment: when the reader picks a layer the browser lacks, only this reruns, to send it."""
    if (int(state.get("layer")), int(state.get("head"))) != (layer, head):  # "show … below" moved the page
        st.rerun(scope="app")
    prompt, every = maps_plan(view, hide)
    layers = tuple(range(view.n_layers)) if every else (_wanted_layer(prompt, layer, head),)
    blob = cache.head_maps_blob(lambda: layers_blob(view, hide, layers, prompt), prompt, layers)
    head_maps(blob, component_view(view, prompt, every, layer, head), key="heatmap", on_open=state.set_head,
              on_layer=lambda wanted: st.session_state.update(_head_maps_wanted=(prompt, layer, head, wanted)))
    where = "heads and layers (← / → and ↑ / ↓)" if every else "heads (← / →) and layers (↑ / ↓: a layer is fetched)"
    st.caption(f"The map switches {where} in your browser; the views below follow the page's Layer and Head.")


def _wanted_layer(prompt: str, layer: int, head: int) -> int:
    """The layer the reader asked the component for, while the page's view is the one they asked it in;
    else the page's layer."""
    wanted = st.session_state.get("_head_maps_wanted")
    if wanted and wanted[:3] == (prompt, layer, head):
        return wanted[3]
    st.session_state.pop("_head_maps_wanted", None)  # asked under another view: the browser shows the page's now
    return layer


def _plain_chart(view, layer: int, head: int, hide: bool) -> None:
    """The map as an ordinary chart: a fallback where the component cannot load. Lazy, like the steps."""
    box = st.expander("The map as a plain chart (if the map above does not load)", expanded=False,
                      key="plain_map_open", on_change="rerun")
    with box:
        if not box.open:
            return
        if view.big:
            _pooled_map(view, layer, head, hide, head_title(view.config, layer, head), key="heatmap_plain")
            return
        probs = view.traced.trace.attn(layer, head)
        drawn = hide_sink(probs) if hide else probs
        st.plotly_chart(charts.attention_heatmap(drawn.numpy(), view.tokens, view.tokens,
                                                 title=head_title(view.config, layer, head)), key="heatmap_plain")
        st.caption(metrics_line(view.table, layer, head))


def _pooled_map(view, layer: int, head: int, hide: bool, title: str, key: str = "heatmap") -> None:
    """The whole map pooled (the largest weight per block)."""
    pooled, block = cache.get_map_overview(view.source, view.prompt, view.bos, layer, head, hide)
    st.plotly_chart(big_maps.pooled_attention(pooled, block, view.n, title=title), key=key)


def _region(view, layer: int, head: int, hide: bool) -> None:
    """The exact weights of a region of a long map, for the page's head."""
    n, tokens = view.n, view.tokens
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
    block = -(-n // big_maps.MAX_MAP_CELLS)
    cells = -(-n // block)
    st.caption(f"The whole {n:,} × {n:,} map is drawn as {cells} × {cells} cells (the largest weight in each "
               f"{block} × {block} block); the region below it shows the exact weights of the rows and keys you pick.")
