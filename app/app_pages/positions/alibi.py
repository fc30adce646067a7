"""The ALiBi tabs: on a RoPE model, what ALiBi's bias would do to a head's real scores (a labelled
what-if); on an ALiBi model, the slopes read back from the bias its forward pass added, and each head's
attention with and without that bias (Press et al. 2022)."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from app import cache
from app.app_pages.positions.view import PositionsView
from app.figures import charts
from txviz.analysis.positions import measured as pos
from txviz.model.positions import alibi_slopes
from txviz.model.sinks import head_sink


def bias_chart(view: PositionsView, bias: torch.Tensor, title: str):
    """A (T, S) bias with the future keys (which the causal mask hides anyway) left grey."""
    return charts.matrix(pos.hide_future(bias).numpy(), title=title, x=view.labels, y=view.labels,
                         colorscale="Reds_r", symmetric=False, value_name="bias")


def what_if_tab(view: PositionsView) -> None:
    config, tokens, layer, head = view.config, view.tokens, view.layer, view.head
    slopes = alibi_slopes(config.n_heads).numpy()
    st.markdown(f"This model was trained with **RoPE**, not ALiBi: what follows is a what-if. ALiBi would give head "
                f"h the slope m_h from a geometric sequence (Press et al. 2022); with {config.n_heads} heads: "
                + ", ".join(f"{s:.4g}" for s in slopes) + ".")
    bias = pos.alibi_bias_matrix(config.n_heads, len(tokens))[head]
    scores = cache.get_trace(view.source, view.prompt, view.bos, capture=("attn_scores",),
                             layers=(layer,)).trace.get("attn_scores", layer)[0, head]
    sink = head_sink(view.loaded.model, layer, head)  # gpt-oss: the head's learned sink, else None
    real, biased = pos.attention_probs(scores, sink), pos.with_bias(scores, bias, sink)
    a, b, c = st.columns(3)
    a.plotly_chart(bias_chart(view, bias, f"ALiBi bias of head {head} (slope {slopes[head]:.4g})"), key="alibi_bias")
    b.plotly_chart(charts.attention_heatmap(real.numpy(), tokens, tokens,
                                            title=f"Layer {layer} head {head}: as the model attends"), key="alibi_real")
    c.plotly_chart(charts.attention_heatmap(biased.numpy(), tokens, tokens,
                                            title="…with this ALiBi bias added (what-if)"), key="alibi_overlay")
    st.caption(f"Adding the penalty moves weight toward recent tokens: this head looks on average "
               f"{float(pos.mean_distance(real)):.1f} tokens back, {float(pos.mean_distance(biased)):.1f} with the "
               "bias. The model never trained with it, so this is not how it behaves.")


def measured_tab(view: PositionsView) -> None:
    config, tokens, layer, head = view.config, view.tokens, view.layer, view.head
    tr = cache.get_trace(view.source, view.prompt, view.bos, capture=("alibi_bias", "attn_logits", "attn_scores"),
                         layers=(layer,)).trace
    bias, scores = tr["alibi_bias"], tr.get("attn_scores", layer)[0]  # (H, T, S), (H, T, S)
    if len(tokens) < 2:
        st.info("A one-token prompt has no distance for the bias to penalize: type a longer prompt.")
        return
    measured, formula = pos.measured_slopes(bias).numpy(), alibi_slopes(config.n_heads, config.alibi_bias_max).numpy()
    st.markdown("Slopes read back from the bias this model's forward pass added: "
                + ", ".join(f"{s:.4g}" for s in measured) + f" (the formula's differ by at most "
                f"{float(np.abs(measured - formula).max()):.1e}). A head with slope m loses m·d of score for a key d "
                "tokens back: the steepest head is nearly blind beyond a few tokens, the gentlest sees the whole window.")
    real, unbiased = pos.attention_probs(scores), pos.without_bias(scores, bias)
    a, b, c = st.columns(3)
    a.plotly_chart(bias_chart(view, bias[head], f"Bias of head {head} (slope {measured[head]:.4g})"), key="alibi_bias")
    b.plotly_chart(charts.attention_heatmap(real[head].numpy(), tokens, tokens,
                                            title=f"Layer {layer} head {head}: as the model attends"), key="alibi_real")
    c.plotly_chart(charts.attention_heatmap(unbiased[head].numpy(), tokens, tokens,
                                            title="…the same scores without the bias"), key="alibi_unbiased")
    st.dataframe({"head": list(range(config.n_heads)), "slope (measured)": measured.tolist(),
                  "mean distance looked back": pos.mean_distance(real).tolist(),
                  "…without the bias": pos.mean_distance(unbiased).tolist()}, hide_index=True)
    st.caption(f"Layer {layer}, this prompt. The bias is the same in every layer; the scores it is added to are not.")
