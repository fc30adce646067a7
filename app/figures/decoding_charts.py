"""Arrays → plotly figures of one decoding step and of a whole run: the sampler's distribution (raw,
after the temperature, after top-k / top-p renormalised, the cut marked, the drawn token outlined), the
new token's attention row with a sliding window's cut, every head's row, the cache's bytes per layer
against the formula, and the "decided at layer" strip of the logit lens. Built from plain dicts
(charts.unvalidated), tests check each against plotly's schema. A step's four are drawn as one figure
(``step_figure``): a scrub then sends and redraws one chart, not four, each of which cost chromium its own
layout and drawing. Probabilities and weights go out rounded to 6 decimals (what a hover shows has 4)."""

from __future__ import annotations

import functools

import numpy as np

from app.figures.charts import MASKED_COLOR, SCALE, colorscale, token_labels, unvalidated

RAW, TEMPERED, SAMPLED = "#adb5bd", "#74c0fc", "#1971c2"
CHOSEN = "#e8590c"
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}
DECIMALS = 6  # of a probability or weight sent to the browser; hovers show 4


def _figure(parts):
    """A builder of (data, layout) as a figure builder; ``.parts`` keeps the plain dicts, for
    ``step_figure`` (a figure's own ``to_dict`` deep-copies it: 20-100 ms for a step's four under load)."""
    @functools.wraps(parts)
    def build(*args, **kwargs):
        return unvalidated(*parts(*args, **kwargs))

    build.parts = parts
    return build


def _rounded(values) -> list[float]:
    return np.round(np.asarray(values, dtype=float), DECIMALS).tolist()


def _scale(name: str) -> list[list]:
    return [list(step) for step in colorscale(name)]  # as plotly stores a named scale


def _category_axis(labels: list[str]) -> dict:
    return {"type": "category", "categoryorder": "array", "categoryarray": labels, "tickangle": -40}


@_figure
def sampler_bars(texts: list[str], raw: list[float], tempered: list[float], sampled: list[float], chosen: int | None,
                 *, show_tempered: bool, title: str) -> object:
    """The candidates (largest raw probability first) with three bars each; ``chosen``: the drawn token's
    index among them (None: outside them). A dashed line sits after the last token the sampler kept."""
    labels = token_labels(texts)
    series = [("raw softmax", raw, RAW)] + [("after temperature", tempered, TEMPERED)] * show_tempered \
        + [("sampled from (cut, renormalised)", sampled, SAMPLED)]
    data = [{"type": "bar", "name": name, "x": labels, "y": _rounded(values), "marker": {"color": color},
             "hovertemplate": "%{x}<br>%{y:.4f}<extra>" + name + "</extra>"} for name, values, color in series]
    shapes, kept = [], sum(v > 0 for v in sampled)
    if 0 < kept < len(labels):
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": kept - 0.5, "x1": kept - 0.5, "y0": 0, "y1": 1,
                       "line": {"color": "#c92a2a", "dash": "dash", "width": 2}})
    if chosen is not None:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": chosen - 0.48, "x1": chosen + 0.48,
                       "y0": 0, "y1": 1, "line": {"color": CHOSEN, "width": 2}, "fillcolor": "rgba(0,0,0,0)"})
    layout = {"title": {"text": title}, "height": 340, "margin": MARGIN, "barmode": "group",
              "legend": {"orientation": "h", "y": -0.35}, "xaxis": _category_axis(labels),
              "yaxis": {"title": {"text": "probability"}, "rangemode": "tozero"}, "shapes": shapes}
    return data, layout


@_figure
def attention_row(weights: np.ndarray, tokens: list[str], *, window: int | None, title: str) -> object:
    """One head's weights of the new token's query (the last of ``tokens``) over every token up to it;
    with a sliding ``window`` the keys it cannot see are shaded and the cut drawn."""
    labels = token_labels(tokens)
    query = len(tokens) - 1
    data = [{"type": "bar", "name": "attention row", "x": labels, "y": _rounded(weights), "marker": {"color": SAMPLED},
             "hovertemplate": "%{x}: %{y:.4f}<extra></extra>"}]
    shapes = []
    if window is not None and query - window >= 0:  # keys k with query − k ≥ window are outside it
        cut = query - window + 0.5
        shapes = [{"type": "rect", "xref": "x", "yref": "paper", "x0": -0.5, "x1": cut, "y0": 0, "y1": 1,
                   "fillcolor": MASKED_COLOR, "opacity": 0.5, "line": {"width": 0}},
                  {"type": "line", "xref": "x", "yref": "paper", "x0": cut, "x1": cut, "y0": 0, "y1": 1,
                   "line": {"color": "#c92a2a", "dash": "dash", "width": 2}}]
    layout = {"title": {"text": title}, "height": 300, "margin": MARGIN, "showlegend": False, "shapes": shapes,
              "xaxis": {**_category_axis(labels), "showticklabels": len(labels) <= 80},
              "yaxis": {"title": {"text": "weight"}, "rangemode": "tozero"}}
    return data, layout


@_figure
def heads_overview(rows: np.ndarray, tokens: list[str], *, head: int, title: str) -> object:
    """Every head's row (H, keys) of one layer as a heatmap, the chosen ``head`` marked."""
    labels = token_labels(tokens)
    data = [{"type": "heatmap", "name": "every head", "z": np.round(np.asarray(rows, dtype=float), DECIMALS).tolist(),
             "x": labels,
             "y": [f"head {h}" for h in range(rows.shape[0])], "colorscale": _scale(SCALE), "reversescale": False,
             "zmin": 0.0, "hovertemplate": "%{y} → %{x}: %{z:.4f}<extra></extra>"}]
    shapes = [{"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": head - 0.5, "y1": head + 0.5,
               "line": {"color": CHOSEN, "width": 2}, "fillcolor": "rgba(0,0,0,0)"}]
    layout = {"title": {"text": title}, "height": 90 + 22 * rows.shape[0], "margin": MARGIN, "shapes": shapes,
              "xaxis": {**_category_axis(labels), "showticklabels": False},
              "yaxis": {"autorange": "reversed", "type": "category"}}
    return data, layout


@_figure
def kv_bytes(measured: list[int], formula: list[int], *, title: str) -> object:
    """The cache's bytes per layer after the step, measured (bars) against the formula (markers)."""
    layers = list(range(len(measured)))
    data = [{"type": "bar", "name": "measured (the cache's tensors)", "x": layers, "y": [m / 1024 for m in measured],
             "marker": {"color": TEMPERED}, "hovertemplate": "layer %{x}: %{y:.1f} KiB<extra>measured</extra>"},
            {"type": "scatter", "mode": "markers", "name": "formula", "x": layers, "y": [f / 1024 for f in formula],
             "marker": {"color": CHOSEN, "symbol": "line-ew-open", "size": 14, "line": {"width": 3}},
             "hovertemplate": "layer %{x}: %{y:.1f} KiB<extra>formula</extra>"}]
    layout = {"title": {"text": title}, "height": 280, "margin": MARGIN, "legend": {"orientation": "h", "y": -0.3},
              "xaxis": {"title": {"text": "layer"}}, "yaxis": {"title": {"text": "KiB"}, "rangemode": "tozero"}}
    return data, layout


def lens_strip(values: np.ndarray, first_top1: list[int | None], tokens: list[str], *, by: str) -> object:
    """Generated tokens (rows) × lens points (columns: the embedding, then after each layer), coloured by
    the chosen token's rank (log scale; 1 is best) or probability; a ring where it first became top-1."""
    labels = token_labels(tokens)
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


def step_figure(columns: list[list[tuple[tuple[list, dict], int, int]]], *, gap: int = 24) -> object:
    """Figures of the builders above side by side in one: ``columns`` left to right, each a list of
    ((data, layout) from a builder's ``.parts``, plot height px, room below it px: for its tick labels
    and legend) top to bottom. Each figure
    keeps its own axes (numbered), shapes, title (as a heading over its plot) and legend (one per figure
    that has one, under it); a heatmap's colour bar sits beside its own plot."""
    title_px = 28
    height = max(sum(title_px + plot + below + gap for _, plot, below in column) for column in columns)
    width = 1.0 / len(columns)
    data, layout = [], {"height": height, "margin": {"l": 10, "r": 10, "t": 0, "b": 0}, "annotations": [],
                        "shapes": [], "showlegend": True}
    n = 0
    for c, column in enumerate(columns):
        x = [c * width + (0.06 if c else 0.0), (c + 1) * width - (0.0 if c == len(columns) - 1 else 0.06)]
        top = height
        for (part_data, part_layout), plot, below in column:
            n += 1
            part = {"data": part_data, "layout": part_layout}
            y = [(top - title_px - plot) / height, (top - title_px) / height]
            _add_panel(data, layout, part, n, x, y, legend_y=(top - title_px - plot - below + 30) / height)
            top -= title_px + plot + below + gap
    return unvalidated(data, layout)


def _add_panel(data: list, layout: dict, part: dict, n: int, x: list[float], y: list[float], legend_y: float) -> None:
    suffix = "" if n == 1 else str(n)
    xa, ya = f"x{suffix}", f"y{suffix}"
    refs = {"x": xa, "y": ya, ("paper", "x"): f"{xa} domain", ("paper", "y"): f"{ya} domain"}
    own = part["layout"]
    has_legend = own.get("showlegend", True) and any(t.get("name") and t["type"] != "heatmap" for t in part["data"])
    legend = f"legend{n}" if n > 1 else "legend"
    for trace in part["data"]:
        placed = {**trace, "xaxis": xa, "yaxis": ya, "showlegend": has_legend, "legend": legend}
        if trace["type"] == "heatmap":
            placed["colorbar"] = {**trace.get("colorbar", {}), "x": x[1] + 0.005, "xanchor": "left",
                                  "y": (y[0] + y[1]) / 2, "len": y[1] - y[0], "yanchor": "middle"}
        data.append(placed)
    layout[f"xaxis{suffix}"] = {**own.get("xaxis", {}), "domain": x, "anchor": ya}
    layout[f"yaxis{suffix}"] = {**own.get("yaxis", {}), "domain": y, "anchor": xa}
    for shape in own.get("shapes", []):
        layout["shapes"].append({**shape, "xref": refs.get((shape["xref"], "x"), refs.get(shape["xref"])),
                                 "yref": refs.get((shape["yref"], "y"), refs.get(shape["yref"]))})
    title = own.get("title", {}).get("text")
    if title:
        layout["annotations"].append({"text": f"<b>{title}</b>", "xref": "paper", "yref": "paper", "x": x[0], "y": y[1],
                                      "xanchor": "left", "yanchor": "bottom", "yshift": 4, "showarrow": False,
                                      "font": {"size": 14}})
    if has_legend:
        layout[legend] = {"orientation": "h", "x": x[0], "y": legend_y, "xanchor": "left", "yanchor": "top",
                          "bgcolor": "rgba(0,0,0,0)"}  # a long legend never hides the next column's labels
