"""One head's attention map: the control of the page's layer and head, the hide-sink toggle, the map and
the head's metrics. With every map stored, the map is the head maps component (app/components/head_maps),
and its head bar, layer slider and arrow keys are the page's one control of the layer and head: every
head of every layer within the byte budget, switched in the browser, the rest of the page following the
head the reader stops on; past the budget the page's layer, and its neighbours prefetched by a rerun of
the maps' own fragment. A long prompt's maps are rebuilt one head at a time: there the page's own Layer
slider and Head box are the control, and the map is drawn pooled, with an exact region of the page's
head. The plain chart stays as a lazy fallback. What the component gets is assembled in
app/components/head_maps/build.py."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.components.head_maps import head_maps_blob, head_maps_view
from app.components.head_maps.build import component_view, head_title, layers_blob, maps_plan, metrics_line
from app.figures import big_maps, charts
from app.ui import state
from app.ui.widgets import bounded_slider, plain
from txviz.analysis.heads.metrics import hide_sink

WANTED = "_head_maps_wanted"  # the layer the component asked for, and the view it asked under


def head_map(view) -> tuple[int, int, bool]:
    """The layer/head control, the hide-sink toggle and the chosen head's map (pooled, with an exact
    region, when long)."""
    config = view.config
    if view.plan is None:  # every map is stored: whole layers go to the browser, and the map is the control
        hide = _hide_sink_toggle(st)
        layer, head = int(state.get("layer")), int(state.get("head"))
        _browser_maps(view, layer, head, hide)
        if view.big:
            _region(view, layer, head, hide)
        _plain_chart(view, layer, head, hide)
    else:  # a long prompt's maps are rebuilt one head at a time: the page's widgets, one head, pooled
        c1, c2, c3 = st.columns([2, 1, 1])
        bounded_slider(c1, "Layer", 0, view.n_layers - 1, key="layer")
        c2.number_input("Head", 0, config.n_heads - 1, key="head")
        hide = _hide_sink_toggle(c3)
        layer, head = int(state.get("layer")), int(state.get("head"))
        _pooled_map(view, layer, head, hide, head_title(config, layer, head))
        if view.big:
            _region(view, layer, head, hide)
        st.caption(metrics_line(view.table, layer, head))
    if hide and view.bos == "none":
        _no_sink_note(view.tokens[0])
    return layer, head, hide


def _hide_sink_toggle(container) -> bool:
    return container.toggle("Hide sink", key="hide_sink",
                            help="Drop the weight on the first token and renormalize the rest of each row.")


def _no_sink_note(first: str) -> None:
    """Hide sink with nothing before the prompt drops a word of the prompt, not a sink token: say so."""
    st.caption(f"Nothing is put before the prompt, so the first token, {plain(repr(first))}, is the prompt's own "
               "first word: Hide sink drops its column and renormalizes the rest (row 0 is left empty). Choose "
               "'sink token' or 'BOS' under Before the prompt to hide a token that is only a sink.")


def _browser_maps(view, layer: int, head: int, hide: bool) -> None:
    """The map and its controls (the view mount, here: a pick reruns the views below with it), then every
    head of the layer (of every layer, when they fit the byte budget) in a fragment of its own."""
    prompt, every = maps_plan(view, hide)
    head_maps_view(component_view(view, prompt, every, layer, head), key="heatmap", on_pick=state.set_head)
    _maps(view, hide, prompt, every, layer, head)
    where = "heads and layers (← / → and ↑ / ↓)" if every else "heads (← / →) and layers (↑ / ↓: a layer is fetched)"
    st.caption(f"Pick a head here: the map switches {where} in your browser, and the grid and the views below "
               "follow the head you stop on.")


@st.fragment
def _maps(view, hide: bool, prompt: str, every: bool, layer: int, head: int) -> None:
    """The maps the browser gets. A fragment: a layer the browser asks for beside the one painted
    (a prefetch) reruns only this, to send it."""
    layers = tuple(range(view.n_layers)) if every else (_wanted_layer(prompt, layer, head),)
    blob = cache.head_maps_blob(lambda: layers_blob(view, hide, layers, prompt), prompt, layers)
    head_maps_blob(blob, key="heatmap", n_layers=view.n_layers,
                   on_layer=lambda wanted: state.put(WANTED, (prompt, layer, head, wanted)))


def _wanted_layer(prompt: str, layer: int, head: int) -> int:
    """The layer the reader asked the component for, while the page's view is the one they asked it in;
    else the page's layer."""
    wanted = state.get(WANTED, None)
    if wanted and wanted[:3] == (prompt, layer, head):
        return wanted[3]
    state.pop(WANTED)  # asked under another view: the browser shows the page's now
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
