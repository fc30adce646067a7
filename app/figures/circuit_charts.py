"""Figures of the Circuit tab: the circuit as a graph layered by layer, its faithfulness curve, and the
query–key breakdown of one score as a small matrix. Pure functions (no streamlit), tested on their data.

The graph: the embeddings on the left, one column per layer (its heads stacked by index, its MLP on top),
the logits on the right. An edge ends at its target's q, k or v input, drawn solid, dashed or dotted a
little below, at or above the head; its colour is the sign of its score, its width the size. Plotly gives
one width per trace, so widths come in a few steps, one trace per (sign, input, step); each edge's
midpoint carries its hover text.
"""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go

from app.figures.causal_charts import DIVERGING

POSITIVE, NEGATIVE = "#b2182b", "#2166ac"  # RdBu's ends: a positive score red, a negative one blue
INPUT_DASH = {"q": "solid", "k": "dash", "v": "dot", None: "solid"}
INPUT_OFFSET = {"q": -0.25, "k": 0.0, "v": 0.25, None: 0.0}
WIDTHS = (1.0, 2.0, 3.5, 5.5)
_HEAD = re.compile(r"a(\d+)\.h(\d+)$")


def node_position(name: str, n_layers: int, n_heads: int) -> tuple[float, float]:
    """(x, y) of a node: x its layer (the embeddings −1, the logits n_layers), y its head (the MLP n_heads)."""
    if name == "embed":
        return -1.0, (n_heads - 1) / 2
    if name == "logits":
        return float(n_layers), (n_heads - 1) / 2
    head = _HEAD.match(name)
    if head:
        return float(head.group(1)), float(head.group(2))
    return float(name[1:]), float(n_heads)  # "m{layer}"


def head_of(name: str) -> tuple[int, int] | None:
    """(layer, head) of a head's node name, else None."""
    found = _HEAD.match(name or "")
    return None if found is None else (int(found.group(1)), int(found.group(2)))


def _describe(edge: dict) -> str:
    into = f"{edge['target']} ({edge['input']})" if edge["input"] else edge["target"]
    return f"{edge['source']} → {into}<br>score {edge['score']:+.4f}"


def circuit_graph(edges: list[dict], n_layers: int, n_heads: int, *, title: str = "") -> go.Figure:
    """``edges`` [{source, target, input, score}] → the layered graph; only their nodes are drawn."""
    biggest = max((abs(e["score"]) for e in edges), default=1.0) or 1.0
    groups: dict[tuple, tuple[list, list]] = {}
    nodes = {node_position(name, n_layers, n_heads) for edge in edges for name in (edge["source"], edge["target"])}
    mid_x, mid_y, mid_text = [], [], []
    for edge in edges:
        x0, y0 = node_position(edge["source"], n_layers, n_heads)
        x1, y1 = node_position(edge["target"], n_layers, n_heads)
        y1 += INPUT_OFFSET[edge["input"]]
        step = width_step(edge["score"], biggest)
        xs, ys = groups.setdefault((edge["score"] >= 0, edge["input"], step), ([], []))
        xs += [x0, x1, None]
        ys += [y0, y1, None]
        mid = _hover_point((x0, y0), (x1, y1), nodes)
        mid_x.append(mid[0])
        mid_y.append(mid[1])
        mid_text.append(_describe(edge))
    fig = go.Figure()
    for (positive, kind, step), (xs, ys) in sorted(groups.items(), key=lambda item: item[0][2]):
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", hoverinfo="skip", opacity=0.75,
            line=dict(color=POSITIVE if positive else NEGATIVE, width=WIDTHS[step], dash=INPUT_DASH[kind]),
            name=f"{kind or 'MLP/logits'} input, score {'> 0' if positive else '< 0'}", legendgroup=f"{kind}{positive}",
            showlegend=step == max(s for p, k, s in groups if (p, k) == (positive, kind))))
    fig.add_trace(go.Scatter(x=mid_x, y=mid_y, mode="markers", marker=dict(size=6, opacity=0.0),
                             hovertext=mid_text, hoverinfo="text", showlegend=False, name="edges"))
    fig.add_trace(_nodes(edges, n_layers, n_heads))
    fig.update_layout(title=title, height=max(320, 34 * (n_heads + 2)), margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.15), clickmode="event+select", dragmode="pan")
    fig.update_xaxes(title="layer", range=[-1.6, n_layers + 0.6],
                     tickvals=[-1, *range(n_layers), n_layers], ticktext=["emb", *map(str, range(n_layers)), "logits"])
    fig.update_yaxes(title="head (MLP on top)", tickvals=[*range(n_heads), n_heads],
                     ticktext=[*map(str, range(n_heads)), "MLP"], range=[-0.8, n_heads + 0.8])
    return fig


def _hover_point(start: tuple[float, float], end: tuple[float, float], nodes: set) -> tuple[float, float]:
    """Where an edge's hover marker sits: its middle, or a point nearer one end when the middle lies on a
    node (an edge from a head into its own layer's MLP passes the heads between): the browser gives a click
    there to the invisible edge marker, and the head under it would not open."""
    for t in (0.5, 0.4, 0.6, 0.3, 0.7):
        point = (start[0] + t * (end[0] - start[0]), start[1] + t * (end[1] - start[1]))
        if all(abs(point[0] - x) > 0.3 or abs(point[1] - y) > 0.3 for x, y in nodes):
            return point
    return (start[0] + end[0]) / 2, (start[1] + end[1]) / 2


def _nodes(edges: list[dict], n_layers: int, n_heads: int) -> go.Scatter:
    """Every node an edge touches, with the summed |score| of its edges; a head's customdata is its name."""
    weight: dict[str, float] = {}
    for edge in edges:
        for name in (edge["source"], edge["target"]):
            weight[name] = weight.get(name, 0.0) + abs(edge["score"])
    names = sorted(weight, key=lambda n: node_position(n, n_layers, n_heads))
    xy = [node_position(n, n_layers, n_heads) for n in names]
    symbols = ["circle" if head_of(n) else "diamond" if n in ("embed", "logits") else "square" for n in names]
    return go.Scatter(x=[p[0] for p in xy], y=[p[1] for p in xy], mode="markers+text", name="nodes",
                      text=[n if n in ("embed", "logits") else "" for n in names], textposition="top center",
                      marker=dict(size=12, symbol=symbols, color="#444", line=dict(color="white", width=1)),
                      customdata=names, showlegend=False, hoverinfo="text",
                      hovertext=[f"{n}<br>Σ|score| of its edges drawn {weight[n]:.4f}" +
                                 ("<br>click: open this head" if head_of(n) else "") for n in names])


def faithfulness_curve(curve: list[dict], current: int | None = None, measured: float | None = None) -> go.Figure:
    """Faithfulness of the top-n circuits against n (log scale; 0 edges drawn at the left edge)."""
    xs = [max(p["edges"], 1) for p in curve]
    fig = go.Figure(go.Scatter(x=xs, y=[p["faithfulness"] for p in curve], mode="lines+markers", name="curve",
                               customdata=[p["edges"] for p in curve],
                               hovertemplate="%{customdata:,} edges: faithfulness %{y:.3f}<extra></extra>"))
    if current is not None and measured is not None:
        fig.add_trace(go.Scatter(x=[max(current, 1)], y=[measured], mode="markers", name="chosen circuit",
                                 marker=dict(size=13, symbol="star", color=POSITIVE),
                                 hovertemplate=f"{current:,} edges: faithfulness %{{y:.3f}}<extra></extra>"))
    fig.add_hline(y=1.0, line=dict(color="#999", dash="dot"))
    fig.add_hline(y=0.0, line=dict(color="#999", dash="dot"))
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=40, b=10), title="Faithfulness of the top-n edges",
                      showlegend=False)
    fig.update_xaxes(type="log", title="edges kept clean (n)")
    fig.update_yaxes(title="faithfulness")
    return fig


def qk_matrix(pairs: np.ndarray, query_nodes, key_nodes, *, size: int = 8, title: str = "") -> go.Figure:
    """The ``size`` query-side × ``size`` key-side nodes of largest total |pair| as a signed heatmap."""
    pairs = np.asarray(pairs, dtype=float)
    rows = np.argsort(-np.abs(pairs).sum(1), kind="stable")[:size]
    cols = np.argsort(-np.abs(pairs).sum(0), kind="stable")[:size]
    part = pairs[np.ix_(rows, cols)]
    bound = float(np.abs(part).max()) if part.size and np.abs(part).max() > 0 else 1.0
    fig = go.Figure(go.Heatmap(z=part, x=[key_nodes[i] for i in cols], y=[query_nodes[i] for i in rows],
                               colorscale=DIVERGING, reversescale=True, zmid=0, zmin=-bound, zmax=bound,
                               colorbar=dict(title="q·k share", thickness=10),
                               hovertemplate="query side %{y}<br>key side %{x}<br>%{z:+.4f}<extra></extra>"))
    fig.update_layout(title=title, height=120 + 30 * len(rows), margin=dict(l=10, r=10, t=40, b=10))
    fig.update_xaxes(title="key-side node")
    fig.update_yaxes(title="query-side node", autorange="reversed")
    return fig


def width_step(score: float, biggest: float) -> int:
    """The width step an edge of ``score`` is drawn with when the largest |score| is ``biggest``."""
    return min(int(len(WIDTHS) * abs(score) / (biggest or 1.0)), len(WIDTHS) - 1) if math.isfinite(score) else 0
