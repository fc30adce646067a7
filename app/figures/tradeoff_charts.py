"""Figures of the Mixture-of-Experts and design-tradeoffs pages: expert maps and loads, histograms,
labelled points, grouped bars. Pure, no Streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures.charts import log_axis, token_labels


EXPERT_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf")


def _expert_colorscale(n_experts: int) -> list:
    """A discrete colorscale: expert e gets one flat band of [e/E, (e+1)/E]."""
    scale = []
    for e in range(n_experts):
        color = EXPERT_COLORS[e % len(EXPERT_COLORS)]
        scale += [[e / n_experts, color], [(e + 1) / n_experts, color]]
    return scale


def expert_map(expert_ids: np.ndarray, gates: np.ndarray, tokens: list[str], n_experts: int, *,
               layers: list[int] | None = None, title: str = "", shared_gates: np.ndarray | None = None) -> go.Figure:
    """Token × layer map of the best expert each token was sent to; the hover lists every chosen
    expert with its gate, and the shared expert (on every token, outside the top-k) with its gate where
    the model has one. expert_ids and gates are (T, L, K); shared_gates (T, L)."""
    expert_ids, gates = np.asarray(expert_ids), np.asarray(gates, dtype=float)
    t, n_layers, _ = expert_ids.shape
    layers = layers if layers is not None else list(range(n_layers))
    hover = np.empty((t, n_layers), dtype=object)
    for i in range(t):
        for j in range(n_layers):
            chosen = ", ".join(f"expert {e} ({g:.2f})" for e, g in zip(expert_ids[i, j], gates[i, j]))
            shared = "" if shared_gates is None else f"<br>+ shared expert, always on ({shared_gates[i, j]:.2f})"
            hover[i, j] = f"{tokens[i]!r} · layer {layers[j]}<br>{chosen}{shared}"
    fig = go.Figure(go.Heatmap(
        z=expert_ids[:, :, 0].astype(float), x=[str(layer) for layer in layers], y=token_labels(tokens),
        text=hover, hovertemplate="%{text}<extra></extra>", zmin=-0.5, zmax=n_experts - 0.5,
        colorscale=_expert_colorscale(n_experts), xgap=1, ygap=1,
        colorbar=dict(title="expert", tickvals=list(range(n_experts)), ticktext=[str(e) for e in range(n_experts)])))
    fig.update_layout(title=title, height=min(1200, 200 + 18 * t), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="layer", type="category")
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=10))
    return fig


def expert_load_bars(load: np.ndarray, *, layers: list[int] | None = None, title: str = "") -> go.Figure:
    """(L, E) share of the assignments per expert, grouped by layer; the dotted line (in the legend) is an
    even share."""
    load = np.asarray(load, dtype=float)
    n_layers, n_experts = load.shape
    layers = layers if layers is not None else list(range(n_layers))
    x = [f"layer {layer}" for layer in layers]
    fig = go.Figure([go.Bar(x=x, y=load[:, e], name=f"expert {e}", marker_color=EXPERT_COLORS[e % len(EXPERT_COLORS)],
                            hovertemplate="%{x}, expert " + str(e) + ": %{y:.1%}<extra></extra>")
                     for e in range(n_experts)])
    even = 1 / n_experts
    fig.add_hline(y=even, line_dash="dot", line_color="black")
    # named in the legend, not by a label on the line: in a narrow column the label ran under the bars
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(dash="dot", color="black"),
                             name=f"even share (1/{n_experts} = {even:.0%})", hoverinfo="skip"))
    fig.update_layout(title=title, barmode="group", height=400, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_yaxes(title="share of assignments", tickformat=".0%", range=[0, 1])
    return fig


def histograms(series: dict[str, np.ndarray], *, title: str = "", x_title: str = "", bins: int = 30,
               x_range: tuple[float, float] | None = None) -> go.Figure:
    """Overlaid histograms (probability per bin) of several named samples."""
    start, end = x_range if x_range is not None else (None, None)
    xbins = dict(start=start, end=end, size=(end - start) / bins) if x_range is not None else None
    fig = go.Figure([go.Histogram(x=np.asarray(values, dtype=float), name=name, opacity=0.6, histnorm="probability",
                                  nbinsx=bins, xbins=xbins) for name, values in series.items()])
    fig.update_layout(title=title, barmode="overlay", height=320, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.25))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title="share of tokens")
    return fig


def labelled_points(x: list[float], y: list[float], labels: list[str], *, title: str = "", x_title: str = "",
                    y_title: str = "", log_x: bool = False, log_y: bool = False, y_error: list[float] | None = None,
                    y_range: tuple[float, float] | None = None) -> go.Figure:
    """A scatter with a text label on every point (one point per model or config); ``y_error`` draws
    ± error bars, ``y_range`` fixes the y-axis (so noise is not zoomed into a finding)."""
    errors = None if y_error is None else dict(type="data", array=list(y_error), visible=True)
    sides = ["top center"] * len(x) if errors is None else _beside_the_bars(x, y)
    fig = go.Figure(go.Scatter(x=list(x), y=list(y), text=list(labels), mode="markers+text", textposition=sides,
                               marker=dict(size=11), error_y=errors, cliponaxis=False,
                               hovertemplate="%{text}<br>%{x:,.4g} · %{y:,.4g}<extra></extra>"))
    fig.update_layout(title=title, height=340, margin=dict(l=10, r=10, t=40, b=10))
    if y_range is not None:
        fig.update_yaxes(range=list(y_range))
    if errors is not None and not log_x and len(x) > 1:  # room for the labels beside the outermost points
        low, high = min(x), max(x)
        pad = 0.2 * (high - low or abs(high) or 1)
        fig.update_xaxes(range=[low - pad, high + pad])
    fig.update_xaxes(title=x_title, **(log_axis(x) if log_x else {}))
    fig.update_yaxes(title=y_title, **(log_axis(y) if log_y else {}))
    return fig


def _beside_the_bars(x: list[float], y: list[float]) -> list[str]:
    """Labels beside their points, clear of the error bars: points that share an x (variants of equal size)
    take the right and the left side in turn, in order of y, so that two close ones do not print over each other."""
    sides = [""] * len(x)
    for value in set(x):
        at = sorted((i for i, v in enumerate(x) if v == value), key=lambda i: y[i])
        for rank, i in enumerate(at):
            sides[i] = "middle right" if rank % 2 == 0 else "middle left"
    return sides


def grouped_bars(categories: list[str], series: dict[str, list], *, title: str = "", y_title: str = "") -> go.Figure:
    """One group of bars per category, one bar per named series; None values are left out."""
    fig = go.Figure([go.Bar(x=list(categories), y=[np.nan if v is None else float(v) for v in values], name=name)
                     for name, values in series.items()])
    fig.update_layout(title=title, barmode="group", height=400, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_yaxes(title=y_title)
    return fig
