"""What the head grid component (app/components/head_grid) draws: every head of the model as a cell of a
layers × heads grid, coloured by one metric on the Viridis scale, grey where the metric is undefined for
the prompt, the page's head outlined (a component, because as a plotly chart of 270 bars the grid was
drawn anew, from an empty element, on every rerun whose figure changed: every new prompt and every head
switch).
Each cell's colour and hover text are made here, so the browser only paints. Pure, no Streamlit."""

from __future__ import annotations

import numpy as np

from app.figures.charts import GRID_SCALE, MASKED_COLOR, colorscale, scale_colors


def grid_view(values: np.ndarray, *, metric: str, selected: tuple[int, int] | None = None,
              layers: list[int] | None = None) -> dict:
    """(layers, heads) of ``metric`` (NaN: undefined) as the component's data: per cell its colour and
    hover text, the colour bar's range and scale, the selected (layer, head) and the grid's height."""
    values = np.asarray(values, dtype=float)
    n_layers, n_heads = values.shape
    layers = list(range(n_layers)) if layers is None else [int(layer) for layer in layers]
    defined = np.isfinite(values)
    low, high = (float(values[defined].min()), float(values[defined].max())) if defined.any() else (0.0, 1.0)
    colors = np.full(values.shape, MASKED_COLOR, dtype=object)
    colors[defined] = scale_colors(values[defined], low, high)
    hover = [[f"layer {layer} head {head}<br>{metric} " + (f"{values[i, head]:.3f}" if defined[i, head] else
                                                          "undefined for this prompt")
              for head in range(n_heads)] for i, layer in enumerate(layers)]
    return {"metric": metric, "layers": layers, "n_heads": n_heads, "colors": colors.tolist(), "hover": hover,
            "low": low, "high": high, "scale": [list(step) for step in colorscale(GRID_SCALE)],
            "selected": None if selected is None else [int(selected[0]), int(selected[1])],
            "height": 110 + 22 * n_layers}
