"""What the Attention page's head maps component gets, assembled from the page's view (a prompt's trace,
its head table, its tokens): which prompt id the browser files the maps under, whether every layer
goes in one blob, a blob of some layers' maps with each head's title and metrics line, and the small
view (payload.py beside it says what both parts hold; __init__.py mounts them, and the scripts say what
the browser does with them). No Streamlit: the page caches the blob and mounts the component."""

from __future__ import annotations

from app.components.head_maps.payload import all_layers_fit, maps_blob, prompt_id, view_data
from app.services.traces import layers_maps
from txviz.analysis.heads.metrics import METRICS
from txviz.capture.pooling import MAX_MAP_CELLS


def head_title(config, layer: int, head: int) -> str:
    if config.n_groups == 1:
        return f"Layer {layer}, head {head}"
    return (f"Layer {layer}, head {head} (shares KV head {head // config.n_groups} with {config.n_groups - 1} other"
            f"{'s' if config.n_groups != 2 else ''})")


def metrics_line(table, layer: int, head: int) -> str:
    return metrics_of(table[(table["layer"] == layer) & (table["head"] == head)].iloc[0])


def metrics_of(row: dict) -> str:
    return " · ".join(f"{m} {row[m]:.3f}" for m in METRICS if row[m] is not None and row[m] == row[m])


def drawn_rows(view) -> int:
    """Rows (and columns) of each map as the browser draws it: every token, or pooled past MAX_MAP_CELLS."""
    return min(view.n, MAX_MAP_CELLS)


def maps_plan(view, hide: bool) -> tuple[str, bool]:
    """(the prompt id the browser files this prompt's maps under, whether every layer fits one blob)."""
    rows = drawn_rows(view)
    every = all_layers_fit(view.n_layers, view.config.n_heads, rows, rows)
    return prompt_id(view.source, view.prompt, view.bos, hide, rows), every


def layers_blob(view, hide: bool, layers: tuple[int, ...], prompt: str) -> bytes:
    """The layers' maps as the component gets them (the page keeps them in app.cache.head_maps_blob)."""
    config, n_heads = view.config, view.config.n_heads
    maps, block = layers_maps(view.traced, layers, n_heads, hide, max_cells=MAX_MAP_CELLS)
    rows = {(int(r["layer"]), int(r["head"])): r for r in view.table.to_dict("records")}
    return maps_blob(maps, block, prompt=prompt, layers=list(layers),
                     titles=[[head_title(config, layer, h) for h in range(n_heads)] for layer in layers],
                     captions=[[metrics_of(rows[layer, h]) for h in range(n_heads)] for layer in layers])


def component_view(view, prompt: str, every: bool, layer: int, head: int) -> dict:
    """The component's view of the page's layer and head (``view_data``)."""
    block = -(-view.n // drawn_rows(view))
    return view_data(view.tokens, prompt=prompt, block=block, cells=-(-view.n // block), n_layers=view.n_layers,
                     n_heads=view.config.n_heads, all_layers=every, layer=layer, head=head,
                     title=head_title(view.config, layer, head))
