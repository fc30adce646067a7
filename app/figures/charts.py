"""Arrays → plotly figures. Pure functions (no streamlit), tested on their figure data."""

from __future__ import annotations

import functools
import html

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from txviz.loading.tokenizer.token_text import visible_controls

MASKED_COLOR = "#d9d9d9"  # cells the causal mask hides
SCALE = "Blues"
GRID_SCALE = "Viridis"  # the head grid's metric colours


def token_labels(tokens: list[str]) -> list[str]:
    """Unique axis labels: plotly merges equal category names, so prefix the position. Plotly reads tags
    in every label, title and hover (``<a href>`` becomes a link, ``<b>`` bold), so each token's ``&``,
    ``<`` and ``>`` are entities, which plotly shows as the characters."""
    return [f"{i}:{plotly_text(t)}" for i, t in enumerate(tokens)]


def readable(token: str) -> str:
    """A token as the app's strips and pills show it: a space as ␣, a line end as ↵, control characters
    named, nothing as ∅ (a label's leading space is otherwise invisible: " the" and "the" read alike)."""
    return visible_controls(token).replace(" ", "␣").replace("\n", "↵") or "∅"


def plotly_text(text) -> str:
    """``text`` as written in a plotly label or title: its tags and entities shown, not applied."""
    return html.escape(str(text), quote=False)


_labels = token_labels


def unvalidated(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, without plotly.py's check of every property (a graph object validates
    and coerces each value as it is set: the head grid took ~90 ms to build so, ~4 ms this way, and the
    Attention page builds three figures on every rerun). Only for builders whose figures the tests check
    against plotly's schema (tests/app/figures/test_fast_figures.py): the dicts spell every property out
    as plotly stores it (nested, colour scales as lists)."""
    return go.Figure({"data": data, "layout": layout}, _validate=False)


# Streamlit's plotly theme sends colours #000001–#000040 as placeholders and its front end replaces every
# occurrence in the figure's JSON with a theme colour (streamlit/elements/lib/streamlit_plotly_theme.py):
# Magma and Inferno start at #000004, which came out pink on the block page. Written as rgb(), a colour is
# the same and no longer matches.
STREAMLIT_PLACEHOLDERS = frozenset(f"#0000{n:02d}" for n in range(1, 41))


def _unmistakable(color: str) -> str:
    """``color``, written as rgb() if Streamlit would take it for one of its placeholders."""
    if color.lower() not in STREAMLIT_PLACEHOLDERS:
        return color
    return "rgb({}, {}, {})".format(*(int(color[i:i + 2], 16) for i in (1, 3, 5)))


@functools.cache
def colorscale(name: str) -> tuple[tuple[float, str], ...]:
    """A named colour scale as plotly stores it on a figure ((position, colour) steps): what ``unvalidated``
    figures carry, so the browser's colours are the same as a validated figure's; any stop Streamlit
    would repaint is written as rgb()."""
    return tuple((position, _unmistakable(color)) for position, color in go.Heatmap(colorscale=name).colorscale)


def log_axis(values) -> dict:
    """Axis settings for a log axis over ``values``. Plotly's default also labels 2 and 5 (small, unlabelled
    by their decade) in every decade, and the labels run together on a narrow chart: over one to three
    decades the ticks are 1, 2, 5 × 10^k written out, past two one per decade (every other past eight).
    Within a decade plotly's own ticks are kept; across one power of ten, 1 to 9 × 10^k written out."""
    values = np.asarray(values, dtype=float).ravel()
    values = values[np.isfinite(values) & (values > 0)]
    if values.size == 0:
        return dict(type="log")
    low, high = float(values.min()), float(values.max())
    decades = np.log10(high) - np.log10(low)
    first, last = int(np.floor(np.log10(low))), int(np.floor(np.log10(high)))
    if decades < 1 and first == last:
        return dict(type="log")
    if decades < 1:  # across a power of ten plotly labels 20 and 30 as "2" and "3" after the 10: write them out
        ticks = [m * 10.0 ** k for k in (first, last) for m in range(1, 10) if low <= m * 10.0 ** k <= high]
        return dict(type="log", tickvals=ticks, minor=dict(showgrid=False))
    if decades <= 2:
        exponents = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
        ticks = [m * 10.0 ** k for k in exponents for m in (1, 2, 5) if low <= m * 10.0 ** k <= high]
        return dict(type="log", tickvals=ticks, minor=dict(showgrid=False))
    return dict(type="log", dtick=1 if decades <= 8 else 2, minor=dict(showgrid=False))


def attention_heatmap(probs: np.ndarray, q_tokens: list[str], k_tokens: list[str], *,
                      title: str = "", q_offset: int = 0) -> go.Figure:
    """One head's (T, S) attention map; masked (future) cells are left empty and drawn grey.

    ``q_offset`` is the position of the first query row (for a region of a larger map).
    """
    probs = np.asarray(probs, dtype=np.float32)
    t, s = probs.shape
    q_pos = np.arange(q_offset, q_offset + t)[:, None]
    future = np.arange(s)[None, :] > q_pos
    z = np.where(future, np.nan, probs)
    # the hover reads the axis labels ("position:token"): a per-cell copy of the two tokens was 70–80% of
    # what the browser had to parse (107 KB against 31 KB at 64 tokens, 1.7 MB against 0.36 MB at 256)
    heat = dict(type="heatmap", z=z, x=_labels(k_tokens), y=_labels(q_tokens), colorscale=colorscale(SCALE), zmin=0,
                zmax=float(np.nanmax(z)) if t else 1, hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.4f}<extra></extra>",
                colorbar=dict(title=dict(text="weight")), hoverongaps=False)
    tickfont = dict(size=10)
    return unvalidated([heat], dict(
        title=dict(text=title), plot_bgcolor=MASKED_COLOR, height=min(900, 220 + 16 * t),
        margin=dict(l=10, r=10, t=40, b=10),
        yaxis=dict(autorange="reversed", title=dict(text="query (attends from)"), tickfont=tickfont),
        xaxis=dict(title=dict(text="key (attended to)"), tickangle=-60, tickfont=tickfont, side="bottom")))


def scale_colors(values: np.ndarray, low: float, high: float) -> list[str]:
    """``GRID_SCALE``'s colour of each value on the range low…high (plotly's own mapping of numbers)."""
    return list(_scale_colors(tuple(float(v) for v in np.asarray(values, dtype=float).ravel()), low, high))


@functools.lru_cache(maxsize=64)
def _scale_colors(values: tuple[float, ...], low: float, high: float) -> tuple[str, ...]:
    """Kept per grid: plotly's sampling parses the scale's colours again for each value (11 ms for 270
    heads), and a head switch redraws the same grid with another cell outlined."""
    span = high - low if high > low else 1.0
    return tuple(sample_colorscale(GRID_SCALE, list(np.clip((np.asarray(values) - low) / span, 0.0, 1.0))))


def metric_heatmap(values: np.ndarray, *, title: str, zmin: float | None = 0.0, zmax: float | None = None) -> go.Figure:
    """Layers × heads heatmap of one detector score."""
    values = np.asarray(values, dtype=float)
    fig = go.Figure(go.Heatmap(z=values, colorscale="Viridis", zmin=zmin, zmax=zmax,
                               hovertemplate="layer %{y} head %{x}<br>score %{z:.3f}<extra></extra>"))
    fig.update_layout(title=title, height=max(260, 14 * values.shape[0] + 100), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="head", dtick=1)
    # plotly's own ticks on a few rows fall between layers (−0.5, 0.5, 1.5 on a 2-layer model)
    fig.update_yaxes(title="layer", autorange="reversed", **({"dtick": 1} if values.shape[0] <= 12 else {}))
    return fig


def head_view(weights: np.ndarray, tokens: list[str], query: int, *, top: int = 24) -> go.Figure:
    """BertViz-style: lines from the query token (left) to the keys it attends to (right),
    opacity and width proportional to the weight; the ``top`` strongest keys are drawn."""
    weights = np.asarray(weights, dtype=float)[: query + 1]
    n = len(tokens)
    strongest = np.argsort(weights)[::-1][:top]
    peak = float(weights.max()) if len(weights) else 1.0
    data = [dict(type="scatter", x=[0, 1], y=[query, int(key)], mode="lines", hoverinfo="text",
                 text=f"{tokens[query]!r} → {tokens[key]!r}: {weights[key]:.3f}",
                 line=dict(width=1 + 7 * float(weights[key]) / peak,
                           color=f"rgba(31,119,180,{0.15 + 0.85 * float(weights[key]) / peak:.3f})"))
            for key in strongest if weights[key] > 0]
    # a long prompt labels only the query and the keys drawn (8192 labels are a wall, not a view)
    labelled = range(n) if n <= 128 else sorted({query, *(int(k) for k in strongest)})
    # plotly's textposition names the side of the point the text goes on: the queries' labels end at
    # x = 0 ("middle left"), the keys' start at x = 1 ("middle right"), and the lines run between them
    for side, position in ((0, "middle left"), (1, "middle right")):
        shown = [i for i in labelled if side == 1 or n <= 128 or i == query]
        colors = ["red" if (side == 0 and i == query) else "black" for i in shown]
        text = [tokens[i] if n <= 128 else f"{i}: {tokens[i]}" for i in shown]
        data.append(dict(type="scatter", x=[side] * len(shown), y=shown, mode="text", text=text, textposition=position,
                         textfont=dict(color=colors, size=12), hoverinfo="skip"))
    return unvalidated(data, dict(showlegend=False, height=min(1200, 120 + 20 * n), margin=dict(l=10, r=10, t=10, b=10),
                                  xaxis=dict(visible=False, range=[-1.0, 2.0]),
                                  yaxis=dict(visible=False, autorange="reversed")))


def softmax_with_and_without_scaling(scaled: np.ndarray, unscaled: np.ndarray, tokens: list[str]) -> go.Figure:
    """The same row of scores through softmax with and without the 1/√d_k factor."""
    labels = _labels(tokens)
    fig = go.Figure([
        go.Bar(x=labels, y=scaled, name="softmax(QKᵀ/√d_k)"),
        go.Bar(x=labels, y=unscaled, name="softmax(QKᵀ) — no scaling"),
    ])
    fig.update_layout(barmode="group", height=320, margin=dict(l=10, r=10, t=30, b=10), yaxis_title="weight",
                      legend=dict(orientation="h", y=1.15))
    fig.update_xaxes(tickangle=-60)
    return fig


def matrix(values: np.ndarray, *, title: str, x: list[str] | None = None, y: list[str] | None = None,
           colorscale: str = "RdBu", symmetric: bool = True, value_name: str | None = None) -> go.Figure:
    """A small generic heatmap for the step-by-step view (scores, V, outputs). ``value_name`` titles the
    colour bar and the hover (e.g. "bias", "cosine")."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    bound = float(np.abs(finite).max()) if finite.size else 1.0
    named = {} if value_name is None else dict(colorbar=dict(title=value_name),
                                               hovertemplate=f"%{{y}} · %{{x}}<br>{value_name} %{{z:.4g}}<extra></extra>")
    fig = go.Figure(go.Heatmap(z=values, x=x, y=y, colorscale=colorscale, zmid=0 if symmetric else None,
                               zmin=-bound if symmetric else None, zmax=bound if symmetric else None,
                               hoverongaps=False, **named))
    fig.update_layout(title=title, height=320, margin=dict(l=10, r=10, t=40, b=10), plot_bgcolor=MASKED_COLOR)
    fig.update_yaxes(autorange="reversed")
    return fig


def _log_ticks(low: float, high: float) -> tuple[list[float], list[str]]:
    """Colour-bar ticks for values in [low, high] coloured by log10: 1, 2, 5 × 10^k (only 10^k past two
    decades), as (log10 positions, the values written out)."""
    exponents = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
    steps = (1,) if np.log10(high / low) > 2 else (1, 2, 5)
    values = [m * 10.0 ** k for k in exponents for m in steps if low <= m * 10.0 ** k <= high] or [low, high]
    return [float(np.log10(v)) for v in values], [f"{v:,.0f}" if v >= 1 else f"{v:.2g}" for v in values]


def residual_norms(norms: np.ndarray, tokens: list[str]) -> go.Figure:
    """‖x‖ of the residual stream per token after the embedding (0) and each layer, coloured on a log
    scale: one sink token's norm (~20,000 on SmolLM2) is 100× the others', which a linear scale would
    draw all alike."""
    norms = np.asarray(norms, dtype=float)
    floor = float(norms[norms > 0].min()) if (norms > 0).any() else 1.0  # a zero vector: drawn as the least
    shown = np.log10(np.clip(norms, floor, None))
    tickvals, ticktext = _log_ticks(floor, max(float(norms.max()), floor))
    fig = go.Figure(go.Heatmap(z=shown.T, customdata=norms.T, x=list(range(norms.shape[0])), y=_labels(tokens),
                               colorscale=colorscale("Magma"),
                               colorbar=dict(title="‖x‖ (log)", tickvals=tickvals, ticktext=ticktext),
                               hovertemplate="after layer %{x}<br>token %{y}<br>‖x‖ %{customdata:.1f}<extra></extra>"))
    fig.update_layout(height=min(900, 200 + 16 * len(tokens)), margin=dict(l=10, r=10, t=30, b=10))
    # on a few layers plotly's own ticks fall between them (−0.5, 0.5, … on a 3-layer model)
    fig.update_xaxes(title="layer (0 = embeddings)", **({"dtick": 1} if norms.shape[0] <= 13 else {}))
    fig.update_yaxes(autorange="reversed")
    return fig


TOKEN_STRIP_CSS = (".txviz-strip{line-height:2.1;overflow-y:auto;padding:2px;border:1px solid #e9ecef;border-radius:6px}"
                   ".txviz-strip span{display:inline-block;margin:2px;padding:2px 5px;border-radius:4px;"
                   "background:#e7f5ff;font-family:monospace;font-size:13px;white-space:pre;unicode-bidi:isolate}"
                   ".txviz-strip span.s{background:#ffd8a8}.txviz-strip span.h{background:#fff3bf}"
                   ".txviz-strip span.g{background:#f1f3f5;color:#adb5bd;border:1px dashed #ced4da}"
                   ".txviz-strip sub{color:#868e96}")


def token_strip_html(tokens: list[str], special: list[bool], *, highlight: set[int] | None = None,
                     greyed: set[int] | None = None, titles: list[str] | None = None,
                     max_height_px: int | None = None, first: int = 0) -> str:
    """Tokens as boxes with their index (counted from ``first``: a strip that starts mid-run numbers its
    tokens as the run does); special tokens (BOS/sink) in orange, highlights in yellow, ``greyed`` ones
    (left out of what the strip's caption says about them) grey with a dashed border.
    ``titles``: each box's tooltip (default "token i"). ``max_height_px``: past it the strip scrolls, so
    a long prompt does not push the charts off the screen. One class per box, styled once: a
    thousand tokens are ~60 KB of HTML, not 200."""
    highlight, greyed = highlight or set(), greyed or set()
    boxes = []
    for i, (token, is_special) in enumerate(zip(tokens, special)):
        kind = (" class=s" if is_special else " class=g" if i in greyed else " class=h" if i in highlight
                else "")
        text = html.escape(readable(token))
        title = html.escape(titles[i] if titles is not None else f"token {i}", quote=True)
        boxes.append(f"<span{kind} title=\"{title}\"><sub>{first + i}</sub>&nbsp;{text}</span>")
    height = f" style='max-height:{int(max_height_px)}px'" if max_height_px else ""
    return f"<style>{TOKEN_STRIP_CSS}</style><div class='txviz-strip'{height}>" + "".join(boxes) + "</div>"


def lines(x, series: dict[str, np.ndarray], *, title: str = "", x_title: str = "", y_title: str = "",
          log_y: bool = False, log_x: bool = False, height: int = 340, mode: str = "lines") -> go.Figure:
    """Several named series over one x axis; a log axis gets one tick per decade (``log_axis``)."""
    x = list(x)
    ys = {name: np.asarray(y, dtype=float) for name, y in series.items()}
    fig = go.Figure([go.Scatter(x=x, y=y, name=name, mode=mode) for name, y in ys.items()])
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.25))
    fig.update_xaxes(title=x_title, **(log_axis(x) if log_x else {}))
    every_y = np.concatenate([y.ravel() for y in ys.values()]) if ys else np.array([])
    fig.update_yaxes(title=y_title, **(log_axis(every_y) if log_y else {}))
    return fig


def rotation_path(points: np.ndarray, *, title: str, labels: list[str] | None = None) -> go.Figure:
    """A 2-D pair of coordinates as its position changes: RoPE turns it on a circle."""
    points = np.asarray(points, dtype=float)
    fig = go.Figure(go.Scatter(x=points[:, 0], y=points[:, 1], mode="lines+markers",
                               text=labels or [f"position {i}" for i in range(len(points))],
                               marker=dict(color=np.arange(len(points)), colorscale="Viridis", size=7,
                                           colorbar=dict(title="position")),
                               hovertemplate="%{text}<br>(%{x:.3f}, %{y:.3f})<extra></extra>"))
    fig.update_layout(title=title, height=380, margin=dict(l=10, r=10, t=40, b=10))
    fig.update_yaxes(scaleanchor="x", scaleratio=1)
    return fig


def bars(labels: list[str], values: np.ndarray, *, title: str = "", y_title: str = "", log_y: bool = False) -> go.Figure:
    fig = go.Figure(go.Bar(x=list(labels), y=np.asarray(values, dtype=float)))
    fig.update_layout(title=title, height=320, margin=dict(l=10, r=10, t=40, b=10))
    fig.update_yaxes(title=y_title, **(log_axis(values) if log_y else {}))
    return fig
