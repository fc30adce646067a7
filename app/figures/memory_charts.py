"""Arrays → plotly figures for the KV cache & memory page: the cache filling up while the model generates
(an animation over the measured steps) and the memory bill against a GPU. Pure functions, no streamlit
(tests/app/figures/test_memory_charts.py)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

EMPTY, PROMPT, GENERATED = 0, 1, 2
SLOT_COLORS = [[0.0, "#eeeeee"], [0.34, "#eeeeee"], [0.34, "#4c78a8"], [0.67, "#4c78a8"], [0.67, "#f58518"],
               [1.0, "#f58518"]]
BILL_COLORS = {"weights": "#4c78a8", "KV cache": "#f58518", "activations": "#54a24b"}
MAX_FRAMES = 64


def cache_slots(held: np.ndarray, position: int, prompt_len: int, capacity: int) -> np.ndarray:
    """(L, capacity) uint8: which preallocated slots hold a token's K/V when ``position`` tokens have gone
    in. Layer l holds ``held[l]`` tokens, the most recent ones (a sliding window keeps only its last W)."""
    slots = np.full((len(held), capacity), EMPTY, dtype=np.uint8)
    for layer, n in enumerate(np.asarray(held, dtype=int)):
        start = position - n
        slots[layer, start:position] = PROMPT
        slots[layer, max(start, prompt_len):position] = GENERATED
    return slots


def _frame_steps(n_steps: int, max_frames: int) -> list[int]:
    if n_steps <= max_frames:
        return list(range(n_steps))
    return sorted({round(i * (n_steps - 1) / (max_frames - 1)) for i in range(max_frames)})


def cache_growth(positions, held_per_layer, measured_bytes, formula_bytes, *, prompt_len: int, capacity: int,
                 max_frames: int = MAX_FRAMES) -> go.Figure:
    """Left: every layer's cache slots, filled step by step (blue: the prompt, orange: generated, grey:
    preallocated and empty); right: the bytes measured from the cache tensors at each step, against the
    formula. A slider and Play button walk through the steps (at most ``max_frames`` of them); the
    figure opens on the last step."""
    positions = np.asarray(positions, dtype=int)
    held = np.asarray(held_per_layer, dtype=int)  # (S, L)
    measured_mib = np.asarray(measured_bytes, dtype=float) / 2**20
    formula_mib = np.asarray(formula_bytes, dtype=float) / 2**20
    steps = _frame_steps(len(positions), max_frames)
    layers = np.arange(held.shape[1])

    def traces(k: int) -> list:
        slots = cache_slots(held[k], int(positions[k]), prompt_len, capacity)
        return [go.Heatmap(z=slots, x=np.arange(capacity), y=layers, zmin=0, zmax=2, colorscale=SLOT_COLORS,
                           showscale=False, hovertemplate="layer %{y}, slot %{x}<extra></extra>"),
                go.Scatter(x=positions[: k + 1], y=measured_mib[: k + 1], mode="lines+markers",
                           name="measured from the cache tensors", line=dict(color="#f58518"))]

    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.08,
                        subplot_titles=("cache slots per layer (blue: prompt, orange: generated)",
                                        "KV cache MiB"))
    last = steps[-1]
    for trace, col in zip(traces(last), (1, 2)):
        fig.add_trace(trace, row=1, col=col)
    fig.add_trace(go.Scatter(x=positions, y=formula_mib, mode="lines", name="formula",
                             line=dict(color="#4c78a8", dash="dash")), row=1, col=2)
    fig.frames = [go.Frame(data=traces(k), traces=[0, 1], name=str(int(positions[k]))) for k in steps]
    slider = dict(active=len(steps) - 1, currentvalue=dict(prefix="tokens in the cache: "), pad=dict(t=50),
                  x=0.08, len=0.92,
                  steps=[dict(label=str(int(positions[k])), method="animate",
                              args=[[str(int(positions[k]))], dict(mode="immediate", frame=dict(duration=0, redraw=True),
                                                                    transition=dict(duration=0))])
                         for k in steps])
    play = dict(type="buttons", showactive=False, x=0, y=-0.2, xanchor="left", yanchor="top", pad=dict(t=50),
                buttons=[dict(label="▶ Play", method="animate",
                              args=[None, dict(frame=dict(duration=120, redraw=True), fromcurrent=False,
                                               transition=dict(duration=0))])])
    fig.update_layout(height=480, margin=dict(l=10, r=10, t=40, b=10), sliders=[slider], updatemenus=[play],
                      legend=dict(orientation="h", x=0.62, y=0.98, bgcolor="rgba(255,255,255,0.7)"))
    fig.update_xaxes(title="slot (token position)", row=1, col=1)
    fig.update_yaxes(title="layer", autorange="reversed", row=1, col=1)
    fig.update_xaxes(title="tokens in the cache", range=[0, max(int(positions.max()), 1) * 1.05], row=1, col=2)
    fig.update_yaxes(title="MiB", range=[0, max(float(formula_mib.max()), float(measured_mib.max()), 1e-9) * 1.1],
                     row=1, col=2)
    return fig


def token_label(n: int) -> str:
    """1024 → '1K', 131072 → '128K', 1536 → '1.5K'."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    return f"{n / 1024:g}K" if n >= 1024 else str(n)


def memory_bill(tokens, parts: dict[str, np.ndarray], *, gpu_gib: float, title: str = "") -> go.Figure:
    """Stacked bars of GiB per context length (``parts``: weights, KV cache, activations) and the GPU's
    memory as a dashed line."""
    labels = [token_label(int(t)) for t in tokens]
    fig = go.Figure([go.Bar(x=labels, y=np.asarray(values, dtype=float), name=name,
                            marker_color=BILL_COLORS.get(name), hovertemplate=f"{name}: %{{y:.2f}} GiB<extra></extra>")
                     for name, values in parts.items()])
    fig.add_hline(y=gpu_gib, line_dash="dash", line_color="#d62728", annotation_text=f"GPU {gpu_gib:g} GiB",
                  annotation_position="top left")
    fig.update_layout(barmode="stack", title=title, height=380, margin=dict(l=10, r=10, t=40, b=10),
                      legend=dict(orientation="h", y=-0.2, traceorder="normal"))
    fig.update_xaxes(title="context (tokens per sequence)", type="category")
    fig.update_yaxes(title="GiB")
    return fig
