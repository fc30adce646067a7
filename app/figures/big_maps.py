"""A long prompt's T×T attention map as a figure: pooled to at most MAX_MAP_CELLS² cells (the block
maxima of txviz.capture.pooling) or cut to a region, never sent cell by cell. Pure, no Streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures.charts import MASKED_COLOR, SCALE
from txviz.capture.pooling import MAX_MAP_CELLS, pool_attention


def attention_overview(probs: np.ndarray, *, max_cells: int = MAX_MAP_CELLS, title: str = "") -> go.Figure:
    """One head's whole (T, S) map at ≤ max_cells × max_cells cells (block max), labelled by token
    position; the block size is in the title and the hover."""
    probs = np.asarray(probs, dtype=np.float32)
    pooled, block = pool_attention(probs, max_cells=max_cells)
    return pooled_attention(pooled, block, probs.shape[0], title=title)


def color_cap(pooled: np.ndarray) -> float:
    """The top of a pooled map's colour scale: its 99th percentile (else its max, else 1)."""
    finite = pooled[np.isfinite(pooled)]
    top = float(np.percentile(finite, 99)) if finite.size else 1.0
    return top if top > 0 else (float(finite.max()) if finite.size and finite.max() > 0 else 1.0)


def pooled_attention(pooled: np.ndarray, block: int, n_tokens: int, *, title: str = "") -> go.Figure:
    """A map already pooled by txviz.capture.pooling (cells of ``block`` × ``block`` tokens) as a heatmap.
    The colour saturates at the 99th percentile of the cells: a sink column near 1 would otherwise
    leave everything else white (the hover shows every cell's value)."""
    rows, cols = np.arange(pooled.shape[0]) * block, np.arange(pooled.shape[1]) * block
    unit = "token" if block == 1 else f"{block}×{block} tokens"
    top = color_cap(pooled)
    fig = go.Figure(go.Heatmap(
        z=pooled, x=cols, y=rows, colorscale=SCALE, zmin=0, zmax=top, hoverongaps=False,
        colorbar=dict(title=f"max<br>(capped at<br>{top:.2f})"),
        hovertemplate=f"queries from %{{y}}<br>keys from %{{x}}<br>max over {unit}: %{{z:.4f}}<extra></extra>"))
    fig.update_layout(title=f"{title} · each cell = {unit} (max)" if title else f"each cell = {unit} (max)",
                      plot_bgcolor=MASKED_COLOR, height=min(900, 260 + 3 * pooled.shape[0]),
                      margin=dict(l=10, r=10, t=40, b=10))
    fig.update_yaxes(autorange="reversed", title="query position (attends from)")
    fig.update_xaxes(title="key position (attended to)")
    return fig


def attention_region(probs: np.ndarray, q_tokens: list[str], k_tokens: list[str], *, q_offset: int, k_offset: int,
                     title: str = "", max_cells: int = MAX_MAP_CELLS) -> go.Figure:
    """Rows q_offset… × keys k_offset… of a larger map at full resolution, labelled with absolute
    positions; future cells grey. Regions wider or taller than ``max_cells`` are refused: pool them."""
    probs = np.asarray(probs, dtype=np.float32)
    t, s = probs.shape
    if t > max_cells or s > max_cells:
        raise ValueError(f"a {t}×{s} region is over {max_cells}×{max_cells} cells: choose a smaller one, "
                         "or draw it with attention_overview")
    q_pos, k_pos = np.arange(q_offset, q_offset + t), np.arange(k_offset, k_offset + s)
    z = np.where(k_pos[None, :] > q_pos[:, None], np.nan, probs)
    q_labels = [f"{p}:{tok}" for p, tok in zip(q_pos, q_tokens)]
    k_labels = [f"{p}:{tok}" for p, tok in zip(k_pos, k_tokens)]
    finite = z[np.isfinite(z)]
    fig = go.Figure(go.Heatmap(
        z=z, x=k_labels, y=q_labels, colorscale=SCALE, zmin=0, zmax=float(finite.max()) if finite.size else 1,
        hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>", colorbar=dict(title="weight"),
        hoverongaps=False))
    fig.update_layout(title=title or f"queries {q_offset}–{q_offset + t - 1} × keys {k_offset}–{k_offset + s - 1}",
                      plot_bgcolor=MASKED_COLOR, height=min(900, 220 + 16 * t), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_yaxes(autorange="reversed", title="query (attends from)", tickfont=dict(size=10))
    fig.update_xaxes(title="key (attended to)", tickangle=-60, tickfont=dict(size=10))
    return fig


