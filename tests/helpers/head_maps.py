"""Reading the Attention page's head maps component (app/components/head_maps) back from an AppTest:
its data, a layer's maps decoded, and the figure of a head as the browser draws it."""

from __future__ import annotations

import base64
import json

import numpy as np


def head_maps_data(at) -> dict:
    """The data the component was mounted with (key "heatmap")."""
    for element in at.get("bidi_component"):
        if element.proto.id and element.proto.id.endswith("heatmap"):
            return json.loads(element.proto.json)
    raise AssertionError("no head maps component on the page")


def layer_maps(at, layer: int | None = None) -> np.ndarray:
    """(heads, rows, cols) float32 of ``layer`` (None: the page's) as the browser decodes them; NaN where
    the future is masked."""
    from app.figures.head_maps import decode_maps

    data = head_maps_data(at)
    layer = data["layer"] if layer is None else layer
    return decode_maps(data["maps"], data["shape"])[data["layers"].index(layer)]


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
    figure["layout"]["title"]["text"] = data["titles"][index][head]
    return figure
