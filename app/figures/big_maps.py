"""A long prompt's T×T attention map as a figure: pooled to at most MAX_MAP_CELLS² cells (block max or
mean, one band of rows at a time) or cut to a region, never sent cell by cell. Pure, no Streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures.charts import MASKED_COLOR, SCALE


MAX_MAP_CELLS = 256


def pool_attention(probs: np.ndarray, *, max_cells: int = MAX_MAP_CELLS, reduce: str = "max") -> tuple[np.ndarray, int]:
    """A causal (T, S) map → (⌈T/b⌉, ⌈S/b⌉) cells of b×b tokens, b = ⌈max(T, S)/max_cells⌉. Each cell
    is the max (or mean) of the visible weights of its block (key ≤ query); NaN where the whole block
    lies in the future. Works one band of b rows at a time, so an 8192² map needs no second copy."""
    t, s = probs.shape
    return pool_attention_rows(lambda start, stop: probs[start:stop], t, s, max_cells=max_cells, reduce=reduce)


def pool_attention_rows(rows_of, t: int, s: int, *, max_cells: int = MAX_MAP_CELLS, reduce: str = "max",
                        chunk_bands: int = 64) -> tuple[np.ndarray, int]:
    """``pool_attention`` of a (T, S) map that is never whole: ``rows_of(start, stop)`` gives rows
    start…stop−1 (e.g. rebuilt from q/k), asked for ``chunk_bands`` bands of b rows at a time."""
    if reduce not in ("max", "mean"):
        raise ValueError(f"reduce must be 'max' or 'mean', got {reduce!r}")
    block = max(1, -(-max(t, s) // max_cells))
    n_cols = -(-s // block)
    pooled = np.full((-(-t // block), n_cols), np.nan, dtype=np.float32)
    key = np.arange(n_cols * block)
    chunk_rows = block * chunk_bands
    for chunk_start in range(0, t, chunk_rows):
        chunk = np.asarray(rows_of(chunk_start, min(chunk_start + chunk_rows, t)), dtype=np.float32)
        for start in range(chunk_start, chunk_start + chunk.shape[0], block):
            rows = np.full((block, n_cols * block), np.nan, dtype=np.float32)
            rows[: min(block, t - start), :s] = chunk[start - chunk_start:start - chunk_start + block]
            rows[key[None, :] > np.arange(start, start + block)[:, None]] = np.nan  # the future
            cells = rows.reshape(block, n_cols, block).transpose(1, 0, 2).reshape(n_cols, -1)  # (cols, b·b)
            visible = np.isfinite(cells)
            count = visible.sum(axis=1)
            if reduce == "max":
                value = np.where(visible, cells, -np.inf).max(axis=1)
            else:
                value = np.where(visible, cells, 0.0).sum(axis=1) / np.maximum(count, 1)
            pooled[start // block] = np.where(count > 0, value, np.nan)
    return pooled, block


def attention_overview(probs: np.ndarray, *, max_cells: int = MAX_MAP_CELLS, reduce: str = "max",
                       title: str = "") -> go.Figure:
    """One head's whole (T, S) map at ≤ max_cells × max_cells cells (block max or mean), labelled by
    token position; the block size is in the title and the hover."""
    probs = np.asarray(probs, dtype=np.float32)
    pooled, block = pool_attention(probs, max_cells=max_cells, reduce=reduce)
    return pooled_attention(pooled, block, probs.shape[0], reduce=reduce, title=title)


def color_cap(pooled: np.ndarray) -> float:
    """The top of a pooled map's colour scale: its 99th percentile (else its max, else 1)."""
    finite = pooled[np.isfinite(pooled)]
    top = float(np.percentile(finite, 99)) if finite.size else 1.0
    return top if top > 0 else (float(finite.max()) if finite.size and finite.max() > 0 else 1.0)


def pooled_attention(pooled: np.ndarray, block: int, n_tokens: int, *, reduce: str = "max", title: str = "") -> go.Figure:
    """A map already pooled by ``pool_attention`` (cells of ``block`` × ``block`` tokens) as a heatmap.
    The colour saturates at the 99th percentile of the cells: a sink column near 1 would otherwise
    leave everything else white (the hover shows every cell's value)."""
    rows, cols = np.arange(pooled.shape[0]) * block, np.arange(pooled.shape[1]) * block
    unit = "token" if block == 1 else f"{block}×{block} tokens"
    top = color_cap(pooled)
    fig = go.Figure(go.Heatmap(
        z=pooled, x=cols, y=rows, colorscale=SCALE, zmin=0, zmax=top, hoverongaps=False,
        colorbar=dict(title=f"{reduce}<br>(capped at<br>{top:.2f})"),
        hovertemplate=f"queries from %{{y}}<br>keys from %{{x}}<br>{reduce} over {unit}: %{{z:.4f}}<extra></extra>"))
    fig.update_layout(title=f"{title} · each cell = {unit} ({reduce})" if title else f"each cell = {unit} ({reduce})",
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


