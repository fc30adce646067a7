"""QKᵀ → ·s → (soft-cap) → mask → softmax → ·V for one head, recomputed from its layer's captured q, k, v
as the model runs the layer: its own query scale s, its soft-cap where it has one, its mask (window)."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import charts
from app.ui.widgets import plain
from txviz.analysis.heads.steps import AttentionSteps, entropy, layer_steps


def step_by_step(source: str, prompt: str, bos: str, tokens: list[str], n_groups: int, layer: int, head: int,
                 query: int) -> None:
    """Every step of this head recomputed from this layer's captured q, k, v, and how far it is from the
    model's own weights. (``n_groups`` is read from the model with the rest of the layer's settings.)"""
    model = cache.get_model(source).model
    layer_trace = cache.get_trace(source, prompt, bos, capture=("q_rot", "k_rot", "v", "attn_probs"),
                                  layers=(layer,)).trace
    steps = layer_steps(model, layer, head, layer_trace.get("q_rot", layer)[0], layer_trace.get("k_rot", layer)[0],
                        layer_trace.get("v", layer)[0])
    diff = float((steps.probs - layer_trace.attn(layer, head)).abs().max())
    t, d = steps.q.shape
    alibi = model.config.positions == "alibi"
    st.markdown(f"Layer {layer}: {_equation(steps, alibi)}")
    st.markdown(
        f"Q is **{t} × {d}** (tokens × d_k), K is **{steps.k.shape[0]} × {d}**, so QKᵀ is **{t} × {t}**; "
        f"{_scale_sentence(steps.scale, d)}{_cap_sentence(steps.softcap)} "
        f"Recomputed from the captured q, k, v, the weights differ from the model's own by at most **{diff:.1e}**.")
    _matrices(steps, charts.token_labels(tokens), alibi)
    st.markdown(f"**Without the scaling** (·{steps.scale:.4f}), row {query} ({plain(repr(tokens[query]))}): "
                f"the softmax gets sharper (entropy {float(entropy(steps.probs[query])):.2f} → "
                f"{float(entropy(steps.unscaled_probs[query])):.2f} nats), "
                "and saturated softmaxes have tiny gradients, which is why the scaling is there.")
    figure = charts.softmax_with_and_without_scaling(steps.probs[query, : query + 1].numpy(),
                                                     steps.unscaled_probs[query, : query + 1].numpy(),
                                                     tokens[: query + 1])
    # the legend names the layer's own scale and cap, where the chart's default says 1/√d_k
    cap = "" if steps.softcap is None else f"{steps.softcap:g}·tanh(·/{steps.softcap:g}) of "
    figure.data[0].name = f"softmax({cap}QKᵀ · {steps.scale:.4f})"
    figure.data[1].name = f"softmax({cap}QKᵀ) — no scaling"
    st.plotly_chart(figure, key="step_softmax")


def _matrices(steps: AttentionSteps, labels: list[str], alibi: bool) -> None:
    """The steps two by two (rows: queries; columns: keys, or the head's d_k dimensions); the soft-cap
    gets a panel of its own only where the layer has one."""
    t, d = steps.q.shape
    scale = f"·{steps.scale:.4f}"
    if steps.softcap is None:
        panels = [("step_masked", steps.masked, f"2–3. {scale}, then {_mask_name(steps, alibi)}")]
    else:
        cap = f"{steps.softcap:g}·tanh(x/{steps.softcap:g})"
        panels = [("step_capped", steps.capped, f"2–3. {scale}, then the soft-cap {cap}"),
                  ("step_masked", steps.masked, f"4. + {_mask_name(steps, alibi)}")]
    last = 4 + len(panels) - 1  # the softmax's number
    square = dict(x=labels, y=labels)
    figures = [("step_raw", charts.matrix(steps.raw.numpy(), title="1. QKᵀ (raw dot products)", **square))]
    figures += [(key, charts.matrix(values.numpy(), title=title, **square)) for key, values, title in panels]
    figures.append(("step_probs", charts.matrix(steps.probs.numpy(), title=f"{last}. softmax (rows sum to 1)",
                                                colorscale="Blues", symmetric=False, **square)))
    figures.append(("step_out", charts.matrix(steps.output.numpy(), title=f"{last + 1}. weights · V → {t} × {d} "
                                              "output of this head", x=[f"d{i}" for i in range(d)], y=labels)))
    columns = st.columns(2)
    for i, (key, figure) in enumerate(figures):
        columns[i % 2].plotly_chart(figure, key=key)


def _equation(steps: AttentionSteps, alibi: bool) -> str:
    """The chain this layer runs, with its own numbers."""
    cap = f" → {steps.softcap:g}·tanh(·/{steps.softcap:g})" if steps.softcap is not None else ""
    mask = "mask" if steps.window is None else f"mask (window {steps.window})"
    return f"QKᵀ → ·{steps.scale:.4f}{cap} → {mask}{' + ALiBi' if alibi else ''} → softmax → ·V"


def _scale_sentence(scale: float, d: int) -> str:
    if abs(scale - d ** -0.5) <= 1e-9 * scale:
        return f"d_k = {d}, so the scores are multiplied by 1/√{d} = {scale:.4f}."
    return (f"the scores are multiplied by the model's own query scale {scale:.4f} (1/√{scale ** -2:.4g}), "
            f"not by 1/√d_k = 1/√{d} = {d ** -0.5:.4f}.")


def _cap_sentence(softcap: float | None) -> str:
    if softcap is None:
        return ""
    return (f" The model then soft-caps them: c·tanh(x/c) with c = {softcap:g} keeps every score inside "
            f"(−{softcap:g}, {softcap:g}), before the mask.")


def _mask_name(steps: AttentionSteps, alibi: bool) -> str:
    bias = " and ALiBi's bias" if alibi else ""
    if steps.window is None:
        return f"the causal mask{bias} (grey = −∞)"
    return f"the causal mask with a window of {steps.window}{bias} (grey = −∞ where i − j ≥ {steps.window})"
