"""QKᵀ → ÷√d_k → mask → softmax → ·V for one head, recomputed from its layer's captured q, k, v."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import charts
from app.ui.widgets import plain
from txviz.analysis.heads.steps import attention_steps, entropy


def step_by_step(source: str, prompt: str, bos: str, tokens: list[str], n_groups: int, layer: int, head: int,
                 query: int) -> None:
    """QKᵀ → ÷√d_k → mask → softmax → ·V recomputed from this layer's captured q, k, v."""
    layer_trace = cache.get_trace(source, prompt, bos, capture=("q_rot", "k_rot", "v", "attn_probs"),
                                  layers=(layer,)).trace
    steps = attention_steps(layer_trace.get("q_rot", layer)[0], layer_trace.get("k_rot", layer)[0],
                            layer_trace.get("v", layer)[0], head, n_groups=n_groups)
    diff = float((steps.probs - layer_trace.attn(layer, head)).abs().max())
    t, d = steps.q.shape
    st.markdown(
        f"Q is **{t} × {d}** (tokens × d_k), K is **{steps.k.shape[0]} × {d}**, so QKᵀ is **{t} × {t}**; "
        f"d_k = {d}, so the scores are multiplied by 1/√{d} = {steps.scale:.4f}. "
        f"Recomputed from the captured q, k, v, the weights differ from the model's own by at most **{diff:.1e}**.")
    labels = charts.token_labels(tokens)  # rows: queries; columns: keys (or the head's d_k dimensions)
    square = dict(x=labels, y=labels)
    a, b = st.columns(2)
    a.plotly_chart(charts.matrix(steps.raw.numpy(), title="1. QKᵀ (raw dot products)", **square), key="step_raw")
    b.plotly_chart(charts.matrix(steps.masked.numpy(), title="2–3. ÷√d_k, then the causal mask (grey = −∞)",
                                 **square), key="step_masked")
    a.plotly_chart(charts.matrix(steps.probs.numpy(), title="4. softmax (rows sum to 1)", colorscale="Blues",
                                 symmetric=False, **square), key="step_probs")
    b.plotly_chart(charts.matrix(steps.output.numpy(), title=f"5. weights · V → {t} × {d} output of this head",
                                 x=[f"d{i}" for i in range(d)], y=labels), key="step_out")
    st.markdown(f"**Without the √d_k scaling**, row {query} ({plain(repr(tokens[query]))}): the softmax gets sharper "
                f"(entropy {float(entropy(steps.probs[query])):.2f} → {float(entropy(steps.unscaled_probs[query])):.2f} nats), "
                "and saturated softmaxes have tiny gradients, which is why the scaling is there.")
    st.plotly_chart(charts.softmax_with_and_without_scaling(steps.probs[query, : query + 1].numpy(),
                                                            steps.unscaled_probs[query, : query + 1].numpy(),
                                                            tokens[: query + 1]), key="step_softmax")
