"""One block, end to end (seed §2, §7): shapes through a real decoder block, the residual stream's
size across layers, and what the model would predict if it stopped after each layer."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import resources
from app.figures import charts
from app.ui import sidebar, state
from app.ui.widgets import bounded_slider
from txviz.analysis.block import block_equation, block_walkthrough, logit_lens

st.title("One block, end to end")
st.markdown(
    "A decoder block reads the **residual stream** x, normalizes it, lets attention mix information "
    "across positions, adds the result back, normalizes again, and runs a per-token feed-forward network "
    "whose output is added back too. Attention is the only place tokens talk to each other; the FFN "
    "transforms each token on its own. Stacking L such blocks and reading the last stream through the "
    "unembedding gives the next-token logits.")

source, loaded, traced = sidebar.prompt_trace(capture=("resid",))
config = loaded.config
st.latex(block_equation(config), help="This model's own norm and feed-forward network, read from its config.")
prompt, bos = state.get("prompt"), state.get("bos")
tokens = resources.display_tokens(loaded, traced)  # labels: split characters shown whole
resid = traced.trace["resid"][:, 0]  # (L+1, T, d)

layer = bounded_slider(st, "Layer", 0, config.n_layers - 1, key="layer")
steps, output = block_walkthrough(loaded.model, resid[layer], layer)
frame = pd.DataFrame([{"step": s.name, "computes": s.equation, "shape": " × ".join(map(str, s.shape)),
                       "mean ‖·‖ per token": round(s.mean_norm, 2)} for s in steps])
st.dataframe(frame, hide_index=True, key="block_steps")
exact = float((resid[layer + 1] - output).abs().max())
st.caption(f"Recomputing the block from its input reproduces the model's own output to {exact:.1e}. "
           f"T = {len(tokens)} tokens, d_model = {config.d_model}, {config.n_heads} heads × d_k {config.head_dim}, "
           f"FFN hidden {config.ffn_hidden}. Every shape keeps T × d_model: the block is a residual update.")

st.subheader("The residual stream grows through the layers")
norms = traced.trace["resid"][:, 0].float().norm(dim=-1).numpy()
st.plotly_chart(charts.residual_norms(norms, tokens), key="resid_norms")

st.subheader("Logit lens")
position = st.select_slider("Position", options=list(range(len(tokens))), value=len(tokens) - 1, key="lens_position",
                            format_func=lambda i: f"{i}: {tokens[i]}")
probs, ids = logit_lens(loaded.model, resid[:, position], top=5)
decode = loaded.tokenizer.decode
lens = pd.DataFrame({"after layer": list(range(config.n_layers + 1))}
                    | {f"#{k + 1}": [f"{decode([int(ids[l, k])])!r} {float(probs[l, k]):.2f}" for l in range(ids.shape[0])]
                       for k in range(ids.shape[1])})
st.dataframe(lens, hide_index=True, key="lens_table")
st.caption("Row 0 reads the embedding itself; the last row is the model's real prediction for the next token.")
