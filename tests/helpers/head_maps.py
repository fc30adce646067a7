"""Reading the Attention page's head maps component (app/components/head_maps) back from an AppTest:
its two mounts' data (the view, the maps blob), a layer's maps decoded, and the figure of a head as the
browser draws it."""

from __future__ import annotations

import base64
import json

import numpy as np


def _mount(at, suffix: str):
    for element in at.get("bidi_component"):
        if element.proto.id and element.proto.id.endswith(suffix):
            return element.proto
    raise AssertionError(f"no head maps component mount ending in {suffix!r} on the page")


def head_maps_view(at) -> dict:
    """The view mount's data (key "heatmap"): the page's layer and head, the figure, the prompt id."""
    return json.loads(_mount(at, "heatmap").json)


def head_maps_blob(at) -> bytes:
    """The maps mount's bytes (key "heatmap_maps")."""
    return _mount(at, "heatmap_maps").bytes


def head_maps_data(at) -> dict:
    """The view and the blob's header together: layer, head, figure, layers sent, shape, titles, zmax."""
    from app.components.head_maps.payload import read_blob

    header, _ = read_blob(head_maps_blob(at))
    return {**head_maps_view(at), **header}


def layer_maps(at, layer: int | None = None) -> np.ndarray:
    """(heads, rows, cols) float32 of ``layer`` (None: the page's) as the browser decodes them; NaN where
    the future is masked."""
    from app.components.head_maps.payload import read_blob

    header, maps = read_blob(head_maps_blob(at))
    layer = head_maps_view(at)["layer"] if layer is None else layer
    return maps[header["layers"].index(layer)]


def heatmap(at, head: int | None = None) -> dict:
    """The figure the component paints for ``head`` (None: the page's) of the page's layer, its z filled
    in as plotly ships arrays ({"dtype", "bdata", "shape"}), so it reads like ``chart(at, "heatmap")`` did."""
    data = head_maps_data(at)
    head = data["head"] if head is None else head
    index = data["layers"].index(data["layer"])
    figure = json.loads(json.dumps(data["figure"]))
    z = np.ascontiguousarray(layer_maps(at)[head], dtype="<f4")
    figure["data"][0]["z"] = {"dtype": "f4", "bdata": base64.b64encode(z.tobytes()).decode(),
                              "shape": f"{z.shape[0]},{z.shape[1]}"}
    figure["data"][0]["zmax"] = data["zmax"][index][head]
    figure["layout"]["title"]["text"] = data["titles"][index][head] + data["title_suffix"]
    return figure
