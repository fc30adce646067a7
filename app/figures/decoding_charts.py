"""Arrays → the plotly figure of a whole decoding run: the "decided at layer" strip of the logit lens. A
step's own charts (the sampler's distribution, the new token's attention row and every head's, the
cache's bytes against the formula) are drawn in the browser by the step viewer
(app/components/decoding_steps), which redraws them per scrub without a round trip. Built from plain
dicts (charts.unvalidated); tests check it against plotly's schema."""

from __future__ import annotations

import numpy as np

from app.figures.charts import colorscale, readable, token_labels, unvalidated

CHOSEN = "#e8590c"
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}


def _scale(name: str) -> list[list]:
    return [list(step) for step in colorscale(name)]  # as plotly stores a named scale


def lens_strip(values: np.ndarray, first_top1: list[int | None], tokens: list[str], *, by: str) -> object:
    """Generated tokens (rows) × lens points (columns: the embedding, then after each layer), coloured by
    the chosen token's rank (log scale; 1 is best) or probability; a ring where it first became top-1."""
    labels = token_labels([readable(token) for token in tokens])  # as the step viewer's pills read them
    points = ["embed"] + [f"L{i}" for i in range(values.shape[1] - 1)]
    by_rank = by == "rank"
    z = np.log10(np.maximum(values, 1)) if by_rank else values
    top = float(max(z.max(), 1.0)) if by_rank else 1.0
    data = [{"type": "heatmap", "z": np.asarray(z, dtype=float).tolist(), "x": points, "y": labels,
             "customdata": np.asarray(values).tolist(), "colorscale": _scale("Viridis"), "reversescale": by_rank,
             "zmin": 0.0, "zmax": top,
             "colorbar": {"title": {"text": "log₁₀ rank" if by_rank else "probability"}},
             "hovertemplate": "%{y} at %{x}: " + ("rank %{customdata}" if by_rank else "p %{customdata:.3f}")
                              + "<extra></extra>"},
            {"type": "scatter", "mode": "markers", "name": "first top-1",
             "x": [points[p] for p in first_top1 if p is not None],
             "y": [label for label, p in zip(labels, first_top1) if p is not None],
             "marker": {"symbol": "circle-open", "size": 11, "color": CHOSEN, "line": {"width": 3}},
             "hovertemplate": "%{y}: first top-1 at %{x}<extra></extra>"}]
    layout = {"height": 120 + 16 * len(labels), "margin": MARGIN, "showlegend": False,
              "xaxis": {"type": "category", "side": "top"},
              "yaxis": {"type": "category", "categoryorder": "array", "categoryarray": labels, "autorange": "reversed"}}
    return unvalidated(data, layout)
