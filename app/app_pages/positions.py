"""Positions page (seed §3): RoPE angles, the relative property, scaling, ALiBi and permutation,
measured on the loaded model."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from app import charts, resources, sidebar, state
from app.widgets import bounded_slider
from txviz.analysis import positions as pos
from txviz.model.positions import alibi_slopes, rope_inv_freq

st.title("Positions")
st.markdown(
    "Attention on its own is blind to order: shuffle the tokens and every query–key dot product is still "
    "there, just moved. So position must be injected. **RoPE** rotates each pair of query/key dimensions by "
    "an angle proportional to the position, with a different speed per pair; because rotations compose, "
    "a query at m and a key at n only see the difference m − n. **ALiBi** leaves q and k alone and "
    "subtracts a per-head slope times the distance from each score. Older models add a learned vector "
    "per absolute position.")
st.latex(r"R_{m\theta_i}=\begin{pmatrix}\cos m\theta_i & -\sin m\theta_i\\ \sin m\theta_i & \cos m\theta_i\end{pmatrix},"
         r"\ \theta_i=\text{base}^{-2i/d},\qquad (R_{m}q)\cdot(R_{n}k)=q\cdot R_{n-m}k,"
         r"\qquad \text{ALiBi: } s_{ij}=q_i\cdot k_j - m_h\,(i-j)")

source, loaded, traced = sidebar.prompt_trace()
config = loaded.config
prompt, bos = state.get("prompt"), state.get("bos")
tokens = list(traced.tokens)
st.caption(f"This model uses **{config.positions}** positions"
           + (f" (θ base {config.rope_theta:g}, {config.head_dim // 2} pairs per head, scaling {config.rope_scaling.kind})"
              if config.positions == "rope" else "") + ".")

tab_rope, tab_scaling, tab_alibi, tab_perm = st.tabs(["RoPE angles", "RoPE scaling", "ALiBi", "Permutation"])

inv_freq = rope_inv_freq(config.head_dim, config.rope_theta, config.rope_scaling)[0]
with tab_rope:
    n_pos = bounded_slider(st, "Positions shown", min(16, config.max_seq_len), min(4096, config.max_seq_len),
                           min(256, config.max_seq_len), key="rope_positions")
    a, b = st.columns(2)
    table = pos.angle_table(inv_freq, n_pos).numpy()
    a.plotly_chart(charts.matrix(table.T, title="Angle m·θ_i mod 2π (pair × position)", colorscale="Twilight",
                                 symmetric=False), key="rope_angles")
    waves = pos.wavelengths(inv_freq).numpy()
    b.plotly_chart(charts.lines(range(len(waves)), {"wavelength (tokens per turn)": waves,
                                                     "context length": np.full(len(waves), config.max_seq_len)},
                                title="Wavelength 2π/θ_i of each pair", x_title="pair i", log_y=True), key="rope_waves")
    b.caption(f"Fast pairs turn every {waves[0]:.1f} tokens and encode fine order; pairs with wavelengths beyond the "
              f"context ({int((waves > config.max_seq_len).sum())} of {len(waves)}) never complete a turn during training.")

    st.subheader("A real query, rotated")
    layer = min(int(state.get("layer")), config.n_layers - 1)
    head = min(int(state.get("head")), config.n_heads - 1)
    qk = resources.get_trace(source, prompt, bos, capture=("q", "k"), layers=(layer,)).trace
    c1, c2, c3 = st.columns(3)
    token = c1.selectbox("Token", range(len(tokens)), index=len(tokens) - 1, format_func=lambda i: f"{i}: {tokens[i]}",
                         key="rope_token")
    pair = bounded_slider(c2, "Pair i", 0, config.head_dim // 2 - 1, 0, key="rope_pair")
    span = c3.slider("Positions", 8, 512, 64, key="rope_span")
    q_vec = qk.get("q", layer)[0, head, token]
    path = pos.pair_trajectory(q_vec, inv_freq, pair, torch.arange(span)).numpy()
    st.plotly_chart(charts.rotation_path(path, title=f"Layer {layer} head {head}: pair {pair} of q({tokens[token]!r}) "
                                                 f"placed at positions 0…{span - 1}"), key="rope_path")

    st.subheader("Only the distance matters")
    key_token = st.selectbox("Key token", range(len(tokens)), index=max(0, len(tokens) - 3),
                             format_func=lambda i: f"{i}: {tokens[i]}", key="rope_key_token")
    k_vec = qk.get("k", layer)[0, head // config.n_groups, key_token]
    scores = pos.relative_scores(q_vec, k_vec, inv_freq, 48)
    spread = pos.spread_per_offset(scores)
    st.plotly_chart(charts.matrix(scores.numpy(), title="q placed at m (rows) · k placed at n (columns)"),
                    key="rope_relative")
    st.markdown(f"Every diagonal (fixed m − n) holds one value: the largest spread along a diagonal is **{spread:.1e}** "
                f"(float64 rounding), against a range of {float(scores.max() - scores.min()):.2f} across diagonals.")

with tab_scaling:
    st.markdown(
        "To stretch a model past its trained context, the rotation speeds are slowed. **Linear** "
        "interpolation divides every θ_i by the factor; **NTK-aware** raises the base instead, so fast pairs "
        "barely change; **YaRN** and **Llama 3** interpolate only the slow pairs and keep the fast ones. "
        "Inside the trained context any change is a perturbation, so the loss below shows how much each "
        "scheme disturbs the model it is applied to.")
    factor = st.select_slider("Scaling factor", [2.0, 4.0, 8.0, 16.0], value=4.0, key="rope_factor")
    freqs = pos.scaled_inv_freqs(config, factor)
    st.plotly_chart(charts.lines(range(len(inv_freq)), {k: (v / freqs["none"]).numpy() for k, v in freqs.items()},
                                 title="θ_i after scaling ÷ original θ_i", x_title="pair i", log_y=True),
                    key="rope_scaled_freqs")
    texts = resources.shipped_texts()
    if texts:
        name = st.selectbox("Text", list(texts), key="rope_text")
        max_tokens = st.select_slider("Tokens", [256, 512, 1024, 2048], value=512, key="rope_text_tokens")
        try:
            losses = resources.get_scaling_losses(source, name, float(factor), int(max_tokens))
        except resources.PromptError as error:  # over the memory budget
            st.warning(str(error))
            losses = None
    if texts and losses is not None:
        window = max(8, len(losses["none"]) // 16)
        smooth = {k: np.convolve(v, np.ones(window) / window, mode="valid") for k, v in losses.items()}
        st.plotly_chart(charts.lines(range(len(next(iter(smooth.values())))), smooth,
                                     title=f"Per-token loss (moving average of {window}) on '{name}'",
                                     x_title="position", y_title="nats"), key="rope_scaling_loss")
        st.dataframe({"scaling": list(losses), "mean loss (nats)": [float(v.mean()) for v in losses.values()],
                      "perplexity": [float(np.exp(v.mean())) for v in losses.values()]}, hide_index=True)

with tab_alibi:
    slopes = alibi_slopes(config.n_heads).numpy()
    st.markdown(f"ALiBi gives head h the slope m_h from a geometric sequence (Press et al. 2022); with "
                f"{config.n_heads} heads: " + ", ".join(f"{s:.4g}" for s in slopes) + ".")
    head = min(int(state.get("head")), config.n_heads - 1)
    layer = min(int(state.get("layer")), config.n_layers - 1)
    a, b = st.columns(2)
    bias = pos.alibi_bias_matrix(config.n_heads, len(tokens))[head].numpy()
    a.plotly_chart(charts.attention_heatmap(np.where(np.isfinite(bias), bias, np.nan), tokens, tokens,
                                            title=f"ALiBi bias of head {head} (slope {slopes[head]:.4g})"), key="alibi_bias")
    if config.positions == "alibi":
        captured = resources.get_trace(source, prompt, bos, capture=("alibi_bias",), layers=(0,)).trace["alibi_bias"]
        b.markdown(f"Bias captured in the forward pass equals the formula: max difference "
                   f"{float(np.nanmax(np.abs(np.where(np.isfinite(bias), captured[head].numpy() - bias, 0)))):.1e}.")
    else:
        logits = resources.get_trace(source, prompt, bos, capture=("attn_scores",), layers=(layer,)).trace
        scores = logits.get("attn_scores", layer)[0, head]
        with_alibi = torch.softmax(scores + torch.from_numpy(np.where(np.isfinite(bias), bias, 0)).float(), dim=-1)
        b.plotly_chart(charts.attention_heatmap(with_alibi.numpy(), tokens, tokens,
                                                title=f"Layer {layer} head {head}: real scores + this ALiBi bias"),
                       key="alibi_overlay")
        b.caption("What this head would attend to if ALiBi's penalty were added to its real scores: weight moves "
                  "toward recent tokens. (The model was trained with RoPE, so this is a what-if.)")

with tab_perm:
    st.markdown("Shuffle the prompt and compare layer 0's scores q_i·k_j/√d over all pairs and heads, as sorted "
                "lists. Without positions they are the same numbers in another order; with RoPE they change.")
    checks = resources.get_permutation_check(source, prompt, bos)
    rows = []
    for name, (original, shuffled, order) in checks.items():
        rows.append({"model": name, "max |Δ| between sorted score sets": float((original - shuffled).abs().max())})
    st.dataframe(rows, hide_index=True)
    order = next(iter(checks.values()))[2].tolist()
    st.caption("Shuffled order: " + " ".join(tokens[i] for i in order))
