"""Figures of the causal tests (which heads cause the answer): per-head effects as layers × heads
grids, the residual stream's patching grid as layers × positions, and one head's maps on a prompt
pair beside their difference. Pure functions (no streamlit), tested on their figure data.

Effects are signed (a patch can raise or lower the logit difference), so the grids use a diverging
scale centred on zero: white means "no effect", whatever the sign of the largest one.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures.charts import token_labels

DIVERGING = "RdBu"


def _symmetric_range(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def effect_grid(values: np.ndarray, *, title: str, unit: str = "Δ logit diff") -> go.Figure:
    """(L, H) signed per-head values → a layers × heads heatmap centred on zero."""
    values = np.asarray(values, dtype=float)
    bound = _symmetric_range(values)
    fig = go.Figure(go.Heatmap(z=values, colorscale=DIVERGING, zmid=0, zmin=-bound, zmax=bound, reversescale=True,
                               colorbar=dict(title=unit, thickness=10),
                               hovertemplate="layer %{y} head %{x}<br>" + unit + " %{z:+.3f}<extra></extra>"))
    fig.update_layout(title=title, height=max(240, 12 * values.shape[0] + 110), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="head", dtick=1 if values.shape[1] <= 16 else 2)
    fig.update_yaxes(title="layer", autorange="reversed")
    return fig


def residual_patching(values: np.ndarray, tokens: list[str]) -> go.Figure:
    """(L, T) change of the logit difference when resid_pre[layer, position] comes from the
    counterfactual → a layers × positions heatmap, the tokens along the bottom."""
    values = np.asarray(values, dtype=float)
    bound = _symmetric_range(values)
    labels = token_labels(tokens)
    fig = go.Figure(go.Heatmap(z=values, x=labels, colorscale=DIVERGING, zmid=0, zmin=-bound, zmax=bound,
                               reversescale=True, colorbar=dict(title="Δ logit diff", thickness=10),
                               hovertemplate="layer %{y}, token %{x}<br>Δ logit diff %{z:+.3f}<extra></extra>"))
    fig.update_layout(title="Residual stream patched at one (layer, position)", margin=dict(l=10, r=10, t=40, b=10),
                      height=max(260, 12 * values.shape[0] + 160))
    fig.update_xaxes(title="position (the sentence's token)", tickangle=-60, tickfont=dict(size=10))
    fig.update_yaxes(title="layer (stream entering it)", autorange="reversed")
    return fig


def pair_maps(first: np.ndarray, second: np.ndarray, first_tokens: list[str], second_tokens: list[str], *,
              title: str = "") -> go.Figure:
    """One head's (T, T) maps on two prompts of equal length, and first − second (red: more in the
    first). The future cells of a causal map are empty in all three."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"the two maps differ in shape: {first.shape} against {second.shape}")
    n = first.shape[0]
    future = np.arange(n)[None, :] > np.arange(n)[:, None]
    masked = lambda m: np.where(future, np.nan, m)  # noqa: E731
    difference = masked(first - second)
    bound = _symmetric_range(difference)
    fig = make_subplots(rows=1, cols=3, subplot_titles=("first prompt", "second prompt", "first − second"),
                        horizontal_spacing=0.06)
    for col, (z, tokens) in enumerate(((masked(first), first_tokens), (masked(second), second_tokens)), start=1):
        labels = token_labels(tokens)
        fig.add_trace(go.Heatmap(z=z, x=labels, y=labels, colorscale="Blues", zmin=0, zmax=1, showscale=False,
                                 hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>"), 1, col)
    # the difference's axes name both tokens where the prompts differ ("14:big/small")
    both = [f"{i}:{a}" if a == b else f"{i}:{a}/{b}" for i, (a, b) in enumerate(zip(first_tokens, second_tokens))]
    fig.add_trace(go.Heatmap(z=difference, x=both, y=both, colorscale=DIVERGING, zmid=0, zmin=-bound, zmax=bound,
                             reversescale=True,
                             colorbar=dict(title="Δ weight", thickness=10),
                             hovertemplate="query %{y}, key %{x}<br>Δ %{z:+.4f}<extra></extra>"), 1, 3)
    fig.update_layout(title=title, height=min(700, 260 + 10 * n), margin=dict(l=10, r=10, t=60, b=10))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=9))
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=9))
    return fig
