"""Positions page (seed §3): what the loaded model uses to know word order, measured on it. RoPE
models get the angles, the relative property and scaling (plus ALiBi as a labelled what-if); ALiBi
models their slopes and bias read back from the forward pass; learned models their position table;
models without positions what the causal mask alone gives. Every model gets the permutation check."""

from __future__ import annotations

import numpy as np
import streamlit as st
import torch

from app import resources
from app.figures import charts
from app.ui import sidebar, state
from app.ui.widgets import bounded_slider
from txviz import limits as limits_
from txviz.analysis import positions as pos
from txviz.model.positions import alibi_slopes, rope_inv_freq

SCHEMES = {
    "rope": ("**RoPE** rotates each pair of query/key dimensions by an angle proportional to the position, "
             "with a different speed per pair; because rotations compose, a query at m and a key at n only "
             "see the difference m − n.",
             r"R_{m\theta_i}=\begin{pmatrix}\cos m\theta_i & -\sin m\theta_i\\ \sin m\theta_i & \cos m\theta_i"
             r"\end{pmatrix},\ \theta_i=\text{base}^{-2i/d},\qquad (R_{m}q)\cdot(R_{n}k)=q\cdot R_{n-m}k"),
    "alibi": ("**ALiBi** leaves q and k alone and subtracts a per-head slope times the distance from each "
              "score, so every head prefers recent tokens, some much more than others.",
              r"s_{ij}=q_i\cdot k_j/\sqrt{d} - m_h\,(i-j),\qquad m_h = 2^{-8h/H}"),
    "learned": ("**Learned absolute positions**: a trained vector per position is added to each token's "
                "embedding before the first layer; the table has one row per position of the training context "
                "and nothing past it.", r"x_i = e_{\text{token}_i} + p_i,\qquad i < T_{\text{train}}"),
    "none": ("**No positions**: nothing tells the model where a token is, except the causal mask: a query at "
             "position i can see only the i + 1 tokens up to it.",
             r"s_{ij}=q_i\cdot k_j/\sqrt{d}\ \ (j \le i),\qquad -\infty\ \ (j > i)"),
}

SCHEME_NAMES = {"rope": "RoPE", "alibi": "ALiBi", "learned": "learned absolute", "none": "none"}

st.title("Positions")
st.markdown("Attention on its own is blind to order: shuffle the tokens and every query–key dot product is "
            "still there, just moved. So position must be injected, or inferred.")
source, loaded, traced = sidebar.prompt_trace()
config = loaded.config
prompt, bos = state.get("prompt"), state.get("bos")
tokens = resources.display_tokens(loaded, traced)  # labels: split characters shown whole
labels = [f"{i}:{t}" for i, t in enumerate(tokens)]
about, formula = SCHEMES[config.positions]
st.markdown(f"Loaded: **{resources.display_name(loaded)}**, position scheme **{SCHEME_NAMES[config.positions]}**"
            + (f" (θ base {config.rope_theta:g}, {config.head_dim // 2} pairs per head, scaling "
               f"{config.rope_scaling.kind})" if config.positions == "rope" else "") + ". " + about)
st.latex(formula)
if config.positions == "learned":  # the table is read before any layer: no layer or head to pick
    layer, head = int(state.get("layer")), int(state.get("head"))
else:
    c1, c2, _ = st.columns([2, 1, 3])
    layer = bounded_slider(c1, "Layer", 0, config.n_layers - 1, key="layer")
    head = int(c2.number_input("Head", 0, config.n_heads - 1, key="head"))


def rope_angles() -> None:
    inv_freq = rope_inv_freq(config.head_dim, config.rope_theta, config.rope_scaling)[0]
    n_pos = bounded_slider(st, "Positions shown", min(16, config.max_seq_len), min(4096, config.max_seq_len),
                           min(256, config.max_seq_len), key="rope_positions")
    a, b = st.columns(2)
    table = pos.angle_table(inv_freq, n_pos).numpy()
    a.plotly_chart(charts.matrix(table.T, title="Angle m·θ_i mod 2π (pair × position)", colorscale="Twilight",
                                 symmetric=False, value_name="angle (rad)"), key="rope_angles")
    waves = pos.wavelengths(inv_freq).numpy()
    b.plotly_chart(charts.lines(range(len(waves)), {"wavelength (tokens per turn)": waves,
                                                     "context length": np.full(len(waves), config.max_seq_len)},
                                title="Wavelength 2π/θ_i of each pair", x_title="pair i", log_y=True), key="rope_waves")
    b.caption(f"Fast pairs turn every {waves[0]:.1f} tokens and encode fine order; pairs with wavelengths beyond the "
              f"context ({int((waves > config.max_seq_len).sum())} of {len(waves)}) never complete a turn during training.")
    rope_real_vectors(inv_freq)


def follow_inputs(keys: tuple[str, ...], *inputs) -> None:
    """Widgets whose options come from ``inputs`` (the model, the prompt's tokens) start afresh when
    those change, instead of keeping a position that now names another token (STYLE 11)."""
    if st.session_state.get(f"{keys[0]}__inputs") != inputs:
        for key in keys:
            st.session_state.pop(key, None)
        st.session_state[f"{keys[0]}__inputs"] = inputs


def rope_real_vectors(inv_freq: torch.Tensor) -> None:
    st.subheader("A real query, rotated")
    qk = resources.get_trace(source, prompt, bos, capture=("q", "k"), layers=(layer,)).trace
    c1, c2, c3 = st.columns(3)
    follow_inputs(("rope_token", "rope_key_token"), source, tuple(tokens))
    token = c1.selectbox("Token", range(len(tokens)), index=len(tokens) - 1, format_func=lambda i: labels[i],
                         key="rope_token")
    pair = bounded_slider(c2, "Pair i", 0, config.head_dim // 2 - 1, 0, key="rope_pair")
    span = c3.slider("Positions", 8, 512, 64, key="rope_span")
    q_vec = qk.get("q", layer)[0, head, token]
    path = pos.pair_trajectory(q_vec, inv_freq, pair, torch.arange(span)).numpy()
    st.plotly_chart(charts.rotation_path(path, title=f"Layer {layer} head {head}: pair {pair} of q({tokens[token]!r}) "
                                                 f"placed at positions 0…{span - 1}"), key="rope_path")
    st.subheader("Only the distance matters")
    key_token = st.selectbox("Key token", range(len(tokens)), index=max(0, len(tokens) - 3),
                             format_func=lambda i: labels[i], key="rope_key_token")
    k_vec = qk.get("k", layer)[0, head // config.n_groups, key_token]
    scores = pos.relative_scores(q_vec, k_vec, inv_freq, 48)
    spread = pos.spread_per_offset(scores)
    st.plotly_chart(charts.matrix(scores.numpy(), title="q placed at m (rows) · k placed at n (columns)",
                                  value_name="q·k"), key="rope_relative")
    st.markdown(f"Every diagonal (fixed m − n) holds one value: the largest spread along a diagonal is **{spread:.1e}** "
                f"(float64 rounding), against a range of {float(scores.max() - scores.min()):.2f} across diagonals.")


def rope_scaling() -> None:
    st.markdown(
        "To stretch a model past its trained context, the rotation speeds are slowed. **Linear** "
        "interpolation divides every θ_i by the factor; **NTK-aware** raises the base instead, so fast pairs "
        "barely change; **YaRN** and **Llama 3** interpolate only the slow pairs and keep the fast ones. "
        "Inside the trained context any change is a perturbation, so the loss below shows how much each "
        "scheme disturbs the model it is applied to.")
    factor = st.select_slider("Scaling factor", [2.0, 4.0, 8.0, 16.0], value=4.0, key="rope_factor")
    freqs = pos.scaled_inv_freqs(config, factor)
    st.plotly_chart(charts.lines(range(len(freqs["none"])), {k: (v / freqs["none"]).numpy() for k, v in freqs.items()},
                                 title="θ_i after scaling ÷ original θ_i", x_title="pair i", log_y=True),
                    key="rope_scaled_freqs")
    texts = resources.shipped_texts()
    if not texts:
        return
    c1, c2 = st.columns(2)
    name = c1.selectbox("Text", list(texts), key="rope_text")
    max_tokens = c2.select_slider("Tokens", [256, 512, 1024, 2048], value=512, key="rope_text_tokens")
    losses = scaling_losses(name, float(factor), int(max_tokens))
    if losses is not None:
        show_scaling_losses(name, losses)


def scaling_losses(name: str, factor: float, max_tokens: int) -> dict | None:
    """The five losses once all are scored, else None: never on load. The scalings still missing run one
    at a time on a click, with a measured time estimate; a Stop button ends the run between scalings,
    and what was scored is kept (for every session), so starting again does only the rest."""
    kinds = pos.SCALING_KINDS
    kept = resources.scaling_losses_kept(source, name, factor, max_tokens)
    stopped = st.session_state.pop("_rope_running", None)  # still set: a click ended the last run early
    if len(kept) == len(kinds):
        return kept
    if stopped is not None:
        at_factor = resources.scaling_losses_kept(*stopped)
        st.info(f"Stopped after {len(at_factor)} of {len(kinds)} scalings (factor {stopped[2]:g}, '{stopped[1]}'): "
                + (f"{', '.join(at_factor)} {'is' if len(at_factor) == 1 else 'are'} kept, so scoring again does only "
                   f"the other {len(kinds) - len(at_factor)}." if at_factor else "none was finished, so nothing was kept."))
    missing = [kind for kind in kinds if kind not in kept]
    n = len(resources.shipped_text_ids(loaded, name, max_tokens))
    try:  # a run the memory budget refuses is said before it is offered
        resources.check_passes(loaded, n, len(missing), f"scoring {n} tokens under {len(missing)} scalings")
        step, how = resources.scaling_step_seconds(source, n)
    except resources.PromptError as error:
        st.warning(str(error))
        return None
    estimate = limits_.format_seconds(step * len(missing))
    what = f"the other {len(missing)} scalings" if kept else f"{len(kinds)} scalings"
    st.caption(f"Scoring {n:,} tokens under {what} takes about {estimate} here ({how}); Stop ends it between "
               "scalings and keeps those already scored.")
    if not st.button(f"Score the text under {what} (≈ {estimate})", key="rope_scaling_run"):
        return None
    st.button("Stop", key="rope_scaling_stop", help="Ends the run after the scaling in progress; those scored are kept.")
    st.session_state["_rope_running"] = (source, name, factor, max_tokens)
    bar = st.progress(0.0, text=f"Scoring {missing[0]}… about {estimate} left")
    try:  # a Stop click interrupts at the next bar update: _rope_running stays set and says so next run
        for done, kind in enumerate(missing, 1):
            resources.score_scaling(source, name, factor, max_tokens, kind)
            step, _ = resources.scaling_step_seconds(source, n)  # the step just measured
            left = limits_.format_seconds(step * (len(missing) - done))
            bar.progress(done / len(missing), text=f"{kind} scored ({done} of {len(missing)}); about {left} left")
    except resources.PromptError as error:  # over the memory budget
        st.warning(str(error))
    st.session_state.pop("_rope_running", None)
    bar.empty()
    kept = resources.scaling_losses_kept(source, name, factor, max_tokens)
    return kept if len(kept) == len(kinds) else None


def show_scaling_losses(name: str, losses: dict) -> None:
    window = max(8, len(losses["none"]) // 16)
    smooth = {k: np.convolve(v, np.ones(window) / window, mode="valid") for k, v in losses.items()}
    st.plotly_chart(charts.lines(range(len(next(iter(smooth.values())))), smooth,
                                 title=f"Per-token loss (moving average of {window}) on '{name}'",
                                 x_title="position", y_title="nats"), key="rope_scaling_loss")
    st.dataframe({"scaling": list(losses), "mean loss (nats)": [float(v.mean()) for v in losses.values()],
                  "perplexity": [float(np.exp(v.mean())) for v in losses.values()]}, hide_index=True)


def bias_chart(bias: np.ndarray, title: str):
    """A (T, S) bias with the future keys (which the causal mask hides anyway) left grey."""
    t, s = bias.shape
    future = np.arange(s)[None, :] > np.arange(t)[:, None] + (s - t)
    return charts.matrix(np.where(future | ~np.isfinite(bias), np.nan, bias), title=title, x=labels, y=labels,
                         colorscale="Reds_r", symmetric=False, value_name="bias")


def alibi_what_if() -> None:
    slopes = alibi_slopes(config.n_heads).numpy()
    st.markdown(f"This model was trained with **RoPE**, not ALiBi: what follows is a what-if. ALiBi would give head "
                f"h the slope m_h from a geometric sequence (Press et al. 2022); with {config.n_heads} heads: "
                + ", ".join(f"{s:.4g}" for s in slopes) + ".")
    bias = pos.alibi_bias_matrix(config.n_heads, len(tokens))[head]
    scores = resources.get_trace(source, prompt, bos, capture=("attn_scores",),
                                 layers=(layer,)).trace.get("attn_scores", layer)[0, head]
    a, b, c = st.columns(3)
    a.plotly_chart(bias_chart(bias.numpy(), f"ALiBi bias of head {head} (slope {slopes[head]:.4g})"), key="alibi_bias")
    b.plotly_chart(charts.attention_heatmap(torch.softmax(scores.float(), dim=-1).numpy(), tokens, tokens,
                                            title=f"Layer {layer} head {head}: as the model attends"), key="alibi_real")
    c.plotly_chart(charts.attention_heatmap(pos.with_bias(scores, bias).numpy(), tokens, tokens,
                                            title="…with this ALiBi bias added (what-if)"), key="alibi_overlay")
    real, biased = (float(pos.mean_distance(m)) for m in (torch.softmax(scores.float(), -1), pos.with_bias(scores, bias)))
    st.caption(f"Adding the penalty moves weight toward recent tokens: this head looks on average {real:.1f} tokens "
               f"back, {biased:.1f} with the bias. The model never trained with it, so this is not how it behaves.")


def alibi_measured() -> None:
    tr = resources.get_trace(source, prompt, bos, capture=("alibi_bias", "attn_logits", "attn_scores"),
                             layers=(layer,)).trace
    bias, scores = tr["alibi_bias"], tr.get("attn_scores", layer)[0]  # (H, T, S), (H, T, S)
    if len(tokens) < 2:
        st.info("A one-token prompt has no distance for the bias to penalize: type a longer prompt.")
        return
    measured, formula = pos.measured_slopes(bias).numpy(), alibi_slopes(config.n_heads).numpy()
    st.markdown("Slopes read back from the bias this model's forward pass added: "
                + ", ".join(f"{s:.4g}" for s in measured) + f" (the formula's differ by at most "
                f"{float(np.abs(measured - formula).max()):.1e}). A head with slope m loses m·d of score for a key d "
                "tokens back: the steepest head is nearly blind beyond a few tokens, the gentlest sees the whole window.")
    real = torch.softmax(scores.float(), dim=-1)
    unbiased = pos.without_bias(scores, bias)
    a, b, c = st.columns(3)
    a.plotly_chart(bias_chart(bias[head].numpy(), f"Bias of head {head} (slope {measured[head]:.4g})"), key="alibi_bias")
    b.plotly_chart(charts.attention_heatmap(real[head].numpy(), tokens, tokens,
                                            title=f"Layer {layer} head {head}: as the model attends"), key="alibi_real")
    c.plotly_chart(charts.attention_heatmap(unbiased[head].numpy(), tokens, tokens,
                                            title="…the same scores without the bias"), key="alibi_unbiased")
    st.dataframe({"head": list(range(config.n_heads)), "slope (measured)": measured.tolist(),
                  "mean distance looked back": pos.mean_distance(real).tolist(),
                  "…without the bias": pos.mean_distance(unbiased).tolist()}, hide_index=True)
    st.caption(f"Layer {layer}, this prompt. The bias is the same in every layer; the scores it is added to are not.")


def learned_table() -> None:
    table = loaded.model.positions.weight.detach().float().cpu()  # (P, d)
    n_rows = table.shape[0]
    similarity = pos.cosine_similarity_matrix(table).numpy()
    near = pos.neighbour_similarity(table, min(32, n_rows - 1)).numpy()
    a, b = st.columns(2)
    a.plotly_chart(charts.matrix(similarity, title=f"Cosine similarity of the {n_rows} position vectors",
                                 value_name="cosine"), key="learned_similarity")
    b.plotly_chart(charts.lines(range(n_rows), {"‖p_i‖": table.norm(dim=-1).numpy()}, title="Norm of each position vector",
                                x_title="position i", y_title="norm"), key="learned_norms")
    b.plotly_chart(charts.lines(range(1, len(near) + 1), {"mean cos(p_i, p_i+k)": near},
                                title="How alike positions k apart are", x_title="offset k", y_title="cosine"),
                   key="learned_neighbours")
    trend = ("similarity falls as positions move apart, so nearby positions get similar codes" if near[-1] < near[0]
             else "similarity does not fall with distance here")
    st.markdown(f"The table has **{n_rows} rows**: positions {n_rows} and later have no vector, so this model "
                f"cannot read past {n_rows} tokens. Mean cosine {near[0]:.2f} one position apart, {near[-1]:.2f} "
                f"{len(near)} apart: {trend}.")


def no_positions() -> None:
    st.markdown("This model has **no position scheme**: no rotation, no bias, no position vector. The causal mask "
                "is the only source of order: a query at i sees i + 1 keys, so a head that spreads its attention "
                "evenly averages over more tokens the later it is. Its attention entropy can reach log(i + 1), and "
                "the model can read its position from how diluted that average is (Haviv et al. 2022).")
    probs = traced.trace.get("attn_probs", layer)[0]  # (H, T, S)
    entropy = pos.row_entropy(probs).numpy()
    series = {f"head {h}": entropy[h] for h in range(config.n_heads)}
    series["log(i + 1): even over all visible keys"] = pos.uniform_entropy(len(tokens)).numpy()
    st.plotly_chart(charts.lines(range(len(tokens)), series, title=f"Layer {layer}: attention entropy per query position",
                                 x_title="query position i", y_title="nats"), key="nopos_entropy")
    if len(tokens) > 1:
        share = entropy[:, 1:].sum(-1) / float(pos.uniform_entropy(len(tokens))[1:].sum())  # (H,)
        st.caption(f"In layer {layer} the heads reach {share.min():.0%}–{share.max():.0%} of the even-spread entropy "
                   "summed over the prompt: the closer to 100 %, the more a head's output is an average whose "
                   "dilution tells the position.")
    st.plotly_chart(charts.attention_heatmap(probs[head].numpy(), tokens, tokens,
                                             title=f"Layer {layer} head {head}"), key="nopos_map")


def permutation() -> None:
    st.markdown("Shuffle the prompt and compare layer 0's scores q_i·k_j/√d over all pairs and heads, as sorted "
                "lists. Without positions they are the same numbers in another order. " + PERMUTATION[config.positions])
    checks = resources.get_permutation_check(source, prompt, bos)
    rows = [{"model": name, "max |Δ| between sorted score sets": float((original - shuffled).abs().max())}
            for name, (original, shuffled, _) in checks.items()]
    st.dataframe(rows, hide_index=True)
    order = next(iter(checks.values()))[2].tolist()
    st.caption("Shuffled order: " + " ".join(tokens[i] for i in order))


PERMUTATION = {
    "rope": "RoPE rotates q and k before the product, so with the model's positions the set changes.",
    "alibi": "ALiBi adds its bias after this product, so both rows are the same set: order reaches this model "
             "only through the bias (first tab).",
    "learned": "The table is added to the embeddings before layer 0, so with the model's positions the set changes.",
    "none": "This model has none to remove: both rows are the same set, and only the causal mask tells order.",
}
SECTION_VIEWS = {"RoPE angles": rope_angles, "RoPE scaling": rope_scaling, "ALiBi what-if": alibi_what_if,
                 "ALiBi slopes and bias": alibi_measured, "Learned position table": learned_table,
                 "No positions: the causal mask": no_positions, "Permutation": permutation}
names = pos.sections(config.positions)
# keyed by the scheme: another model's tabs start afresh; only the open tab runs
for tab, name in zip(st.tabs(list(names), key=f"positions_tab_{config.positions}", on_change="rerun"), names):
    with tab:
        if tab.open is not False:  # None: state tracking off (never here)
            SECTION_VIEWS[name]()
