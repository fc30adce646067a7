"""Arrays → plotly figures for the real models' caches side by side (txviz.analysis.kv.long): total
bytes over a long generation, measured from the buffers (solid) and by the formula (dotted), and the
tokens one layer of each kind keeps. Pure functions, no streamlit."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756")


def total_bytes(runs: dict) -> go.Figure:
    """``runs``: model name → LongCache. MiB against tokens, measured and formula per model."""
    fig = go.Figure()
    for (name, run), color in zip(runs.items(), COLORS):
        fig.add_trace(go.Scatter(x=run.tokens, y=run.measured / 2**20, name=f"{name}: measured buffers",
                                 mode="lines", line=dict(color=color, width=3)))
        fig.add_trace(go.Scatter(x=run.tokens, y=run.formula / 2**20, name=f"{name}: formula",
                                 mode="lines", line=dict(color="black", width=1, dash="dot")))
    fig.update_layout(title="KV cache over a long generation (batch 1)", xaxis_title="tokens",
                      yaxis_title="MiB", height=380, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def held_per_kind(runs: dict, kinds: dict[str, dict[str, int]]) -> go.Figure:
    """Tokens one layer keeps, for each model's layer kinds: ``kinds`` maps model name → {label: layer}."""
    fig = go.Figure()
    for (name, run), color in zip(runs.items(), COLORS):
        for (label, layer), dash in zip(kinds[name].items(), ("solid", "dash")):
            fig.add_trace(go.Scatter(x=run.tokens, y=np.asarray(run.held)[:, layer], mode="lines",
                                     name=f"{name}: {label}", line=dict(color=color, dash=dash)))
    fig.update_layout(title="Tokens one layer keeps", xaxis_title="tokens seen", yaxis_title="tokens kept",
                      height=380, margin=dict(l=10, r=10, t=40, b=10))
    return fig
