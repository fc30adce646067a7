"""The "decided at layer" strip: every generated token × the points of the stack (the embedding, then
after each layer), coloured by the logit lens' rank (or probability) of the token that was finally
chosen, with the first point where it ranked first ringed. Read once at the end of the run."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app.figures import decoding_charts

COLOUR_BY = {"rank": "rank of the chosen token (1: the lens' top choice)", "probability": "the lens' probability of it"}


@st.fragment
def draw(view) -> None:
    steps = [step for step in view.run.steps if step.lens is not None]
    if not steps:
        return
    st.subheader("Where each token was decided")
    st.markdown("The **logit lens** reads the residual stream after every layer through the final norm and the "
                "unembedding, as if the model stopped there. A token is *decided* at the first layer whose reading "
                "already ranks it first (ringed); the last column is the model's own output.")
    by = st.segmented_control("Colour by", list(COLOUR_BY), key="dec_lens_by", format_func=COLOUR_BY.get) or "rank"
    values = np.array([s.lens.ranks if by == "rank" else s.lens.probs for s in steps], dtype=float)  # (S, L+1)
    firsts = [s.lens.first_top1_layer for s in steps]
    texts = [s.token.text or f"#{s.token.id}" for s in steps]
    st.plotly_chart(decoding_charts.lens_strip(values, firsts, texts, by=by), key="dec_lens_strip",
                    config={"displayModeBar": False})
    decided = [f for f in firsts if f is not None]
    if decided:
        late = sum(f == values.shape[1] - 1 for f in decided)
        st.caption(f"Median point of decision: {'the embedding' if np.median(decided) == 0 else 'after layer ' + str(int(np.median(decided)) - 1)}"
                   f"; {late} of {len(steps)} tokens became top-1 only at the last layer"
                   + (f", {len(firsts) - len(decided)} never (sampled below rank 1)." if len(decided) < len(firsts) else "."))
