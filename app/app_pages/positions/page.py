"""Positions page: what the loaded model uses to know word order, measured on it. RoPE
models get the angles, the relative property and scaling (plus ALiBi as a labelled what-if); ALiBi
models their slopes and bias read back from the forward pass; learned models their position table;
models without positions what the causal mask alone gives. Every model gets the permutation check.
Each tab is drawn by one module of this folder."""

from __future__ import annotations

from functools import partial

import streamlit as st

from app.app_pages.positions import alibi, learned, no_positions, permutation, rope, rope_kinds, rope_scaling
from app.app_pages.positions.view import PositionsView
from app.services.traces import display_tokens
from app.ui import sidebar, state
from app.ui.widgets import bounded_slider, plain
from txviz.analysis.positions import measured as pos
from txviz.analysis.positions.rope_kinds import has_two_rope_bases
from txviz.loading.display_name import display_name

SCHEMES = {
    "rope": ("**RoPE** rotates each pair of query/key dimensions by an angle proportional to the position, "
             "with a different speed per pair; because rotations compose, a query at m and a key at n only "
             "see the difference m − n.",
             r"R_{m\theta_i}=\begin{pmatrix}\cos m\theta_i & -\sin m\theta_i\\ \sin m\theta_i & \cos m\theta_i"
             r"\end{pmatrix},\ \theta_i=\text{base}^{-2i/d},\qquad (R_{m}q)\cdot(R_{n}k)=q\cdot R_{n-m}k"),
    "alibi": ("**ALiBi** leaves q and k alone and subtracts a per-head slope times the distance from each "
              "score, so every head prefers recent tokens, some much more than others.",
              r"s_{ij}=q_i\cdot k_j/\sqrt{d} - m_h\,(i-j),\qquad m_h = 2^{-%s\,h/H}"),
    "learned": ("**Learned absolute positions**: a trained vector per position is added to each token's "
                "embedding before the first layer; the table has one row per position of the training context "
                "and nothing past it.", r"x_i = e_{\text{token}_i} + p_i,\qquad i < T_{\text{train}}"),
    "none": ("**No positions**: nothing tells the model where a token is, except the causal mask: a query at "
             "position i can see only the i + 1 tokens up to it.",
             r"s_{ij}=q_i\cdot k_j/\sqrt{d}\ \ (j \le i),\qquad -\infty\ \ (j > i)"),
}
SCHEME_NAMES = {"rope": "RoPE", "alibi": "ALiBi", "learned": "learned absolute", "none": "none"}
SECTION_VIEWS = {"RoPE angles": rope.angles_tab, "RoPE per layer kind": rope_kinds.kinds_tab,
                 "RoPE scaling": rope_scaling.scaling_tab,
                 "ALiBi what-if": alibi.what_if_tab, "ALiBi slopes and bias": alibi.measured_tab,
                 "Learned position table": learned.table_tab, "No positions: the causal mask": no_positions.mask_tab,
                 "Permutation": permutation.permutation_tab}

st.title("Positions")
st.markdown("Attention on its own is blind to order: shuffle the tokens and every query–key dot product is "
            "still there, just moved. So position must be injected, or inferred.")
source, loaded, traced = sidebar.prompt_trace()
config = loaded.config
about, formula = SCHEMES[config.positions]
if config.positions == "alibi":  # the slopes' exponent is the model's own (MPT sets alibi_bias_max)
    formula = formula % f"{config.alibi_bias_max:g}" + (r",\ h=1..H" if config.n_heads & (config.n_heads - 1) == 0 else
                                                         r"\ \text{(interleaved for H not a power of 2)}")
st.markdown(f"Loaded: **{plain(display_name(loaded))}**, position scheme **{SCHEME_NAMES[config.positions]}**"
            + (f" (θ base {config.rope_theta:g}"
               + (f" on global layers, {config.rope_local_theta:g} on local ones" if has_two_rope_bases(config) else "")
               + f", {config.rope_dims // 2} pairs per head"
               + (f" on the first {config.rope_dims} of {config.head_dim} dimensions" if config.rope_dims < config.head_dim else "")
               + ", scaling "
               f"{config.rope_scaling.kind})" if config.positions == "rope" else "") + ". " + about)
st.latex(formula)
nope = [i for i in range(config.n_layers) if config.positions == "rope" and not config.layer_uses_rope(i)]
if nope:  # SmolLM3: every fourth layer has no positions at all
    layers, uses, its, it_matches, knows = (("Layer", "uses", "its", "it matches", "knows") if len(nope) == 1 else
                                            ("Layers", "use", "their", "they match", "know"))
    st.info(f"{layers} {', '.join(map(str, nope))} {uses} **no positions** (NoPE): RoPE does not rotate {its} queries "
            f"and keys, so {it_matches} tokens by content alone and {knows} order only through the causal mask; the "
            "other layers rotate by RoPE.")
if config.positions == "learned":  # the table is read before any layer: no layer or head to pick
    layer, head = int(state.get("layer")), int(state.get("head"))
else:
    c1, c2, _ = st.columns([2, 1, 3])
    layer = bounded_slider(c1, "Layer", 0, config.n_layers - 1, key="layer")
    head = int(c2.number_input("Head", 0, config.n_heads - 1, key="head"))
state.sync_url()  # main.py synced the URL before the sidebar clamped layer and head into this model
view = PositionsView(source, loaded, traced, state.get("prompt"), state.get("bos"),
                     display_tokens(loaded, traced), layer, head)  # tokens: split characters shown whole

names = pos.sections(config.positions)
if has_two_rope_bases(config):  # Gemma 3: local layers rotate with their own base
    names = names[:1] + ("RoPE per layer kind",) + names[1:]
# keyed by the scheme: another model's tabs start afresh; only the open tab runs
tabs_key = f"positions_tab_{config.positions}" + ("_kinds" if has_two_rope_bases(config) else "")
state.lazy_tabs(tabs_key, {name: partial(SECTION_VIEWS[name], view) for name in names})
