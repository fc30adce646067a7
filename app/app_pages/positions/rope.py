"""The "RoPE angles" tab: the angle table m·θ_i and each pair's wavelength, one real query pair
rotated along the positions, and the relative property (q_m·k_n depends on m − n only) on real q and k."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from app import cache
from app.app_pages.positions.view import PositionsView
from app.figures import charts
from app.ui import state
from app.ui.widgets import bounded_slider
from txviz.analysis.positions import measured as pos
from txviz.analysis.positions.rope_kinds import layer_inv_freq, layer_span


def angles_tab(view: PositionsView) -> None:
    config = view.config
    if not config.layer_uses_rope(view.layer):  # a NoPE layer (SmolLM3): nothing rotates here
        st.info(f"Layer {view.layer} uses no positions: RoPE does not rotate its queries and keys. Pick a RoPE "
                "layer to see the angles.")
        return
    inv_freq = layer_inv_freq(config, view.layer)  # Gemma 3's local layers have their own base
    n_pos = bounded_slider(st, "Positions shown", min(16, config.max_seq_len), min(4096, config.max_seq_len),
                           min(256, config.max_seq_len), key="rope_positions")
    a, b = st.columns(2)
    table = pos.angle_table(inv_freq, n_pos).numpy()
    a.plotly_chart(charts.matrix(table.T, title=f"Layer {view.layer}: angle m·θ_i mod 2π (pair × position)",
                                 colorscale="Twilight",
                                 symmetric=False, value_name="angle (rad)"), key="rope_angles")
    wavelengths = pos.wavelengths(inv_freq)
    waves = wavelengths.numpy()
    span = layer_span(config, view.layer)  # a local layer sees only its window, not the whole context
    local = span < config.max_seq_len
    b.plotly_chart(charts.lines(range(len(waves)), {"wavelength (tokens per turn)": waves,
                                                     f"window ({span})" if local else "context length":
                                                         np.full(len(waves), span)},
                                title="Wavelength 2π/θ_i of each pair", x_title="pair i", log_y=True), key="rope_waves")
    beyond = f"({pos.pairs_beyond(wavelengths, span)} of {len(waves)})"
    b.caption(f"Fast pairs turn every {waves[0]:.1f} tokens and encode fine order; " + (
        f"pairs with wavelengths beyond the {span}-token window this layer sees {beyond} never complete a turn "
        f"between a query and any key it attends to (the model's context is {config.max_seq_len:,})." if local else
        f"pairs with wavelengths beyond the context {beyond} never complete a turn during training."))
    real_vectors(view, inv_freq)


def real_vectors(view: PositionsView, inv_freq: torch.Tensor) -> None:
    config, tokens, labels, layer, head = view.config, view.tokens, view.labels, view.layer, view.head
    st.subheader("A real query, rotated")
    qk = cache.get_trace(view.source, view.prompt, view.bos, capture=("q", "k"), layers=(layer,)).trace
    c1, c2, c3 = st.columns(3)
    # a position names another token in another prompt: start again from the last token and the third from
    # last, set through the state so that the browser's picker shows them too (a widget's own default does
    # not replace what the picker last showed, so it read "15:." while the chart drew another token)
    state.follow(("rope_token", "rope_key_token"), (view.source, tuple(tokens)),
                 {"rope_token": len(tokens) - 1, "rope_key_token": max(0, len(tokens) - 3)})
    token = c1.selectbox("Token", range(len(tokens)), format_func=lambda i: labels[i], key="rope_token")
    pair = bounded_slider(c2, "Pair i", 0, config.rope_dims // 2 - 1, 0, key="rope_pair")
    span = c3.slider("Positions", 8, 512, 64, key="rope_span")
    rotated = slice(0, config.rope_dims)  # partial rotary (GPT-NeoX): the other dimensions pass unrotated
    q_vec = qk.get("q", layer)[0, head, token, rotated]
    path = pos.pair_trajectory(q_vec, inv_freq, pair, torch.arange(span)).numpy()
    st.plotly_chart(charts.rotation_path(path, title=charts.plotly_text(
        f"Layer {layer} head {head}: pair {pair} of q({tokens[token]!r}) placed at positions 0…{span - 1}")),
                    key="rope_path")
    st.subheader("Only the distance matters")
    key_token = st.selectbox("Key token", range(len(tokens)), format_func=lambda i: labels[i], key="rope_key_token")
    k_vec = qk.get("k", layer)[0, head // config.n_groups, key_token, rotated]
    scores = pos.relative_scores(q_vec, k_vec, inv_freq, 48)
    spread = pos.spread_per_offset(scores)
    st.plotly_chart(charts.matrix(scores.numpy(), title="q placed at m (rows) · k placed at n (columns)",
                                  value_name="q·k"), key="rope_relative")
    st.markdown(f"Every diagonal (fixed m − n) holds one value: the largest spread along a diagonal is **{spread:.1e}** "
                f"(float64 rounding), against a range of {float(scores.max() - scores.min()):.2f} across diagonals.")
