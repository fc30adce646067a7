"""Every head scored on the built-in labeled set of pronoun sentences (Clark et al. 2019), on request."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import charts
from app.ui.widgets import missing_bos_warning
from txviz.analysis.coref.table import head_grid


def builtin_section(source: str, config, bos: str) -> None:
    st.subheader("Scored on the built-in labeled set")
    st.markdown("240 sentences written for txviz (gender, number, animacy), balanced so that always picking the "
                "nearest candidate, or the first, scores exactly 50%. A head is right when the answer gets more "
                "attention from the pronoun than any other candidate (Clark et al. 2019).")
    prepended_note(cache.get_model(source).tokenizer, bos)
    if st.button("Score every head on the built-in set", key="coref_builtin"):
        st.session_state["coref_builtin_done"] = True
    if not st.session_state.get("coref_builtin_done"):
        return
    try:
        result = cache.get_coref_evaluation(source, bos)
    except ValueError as error:  # e.g. a BOS policy this model's tokenizer has no token for
        st.warning(f"Cannot score the built-in set: {error}")
        return
    m1, m2, m3 = st.columns(3)
    best = result["heads"][0]
    m1.metric("Best head", f"L{best['layer']} H{best['head']}", f"accuracy {best['accuracy']:.1%}",
              delta_color="off", delta_arrow="off")  # its score, not a change: no arrow
    m2.metric("Nearest-candidate baseline", f"{result['baselines']['nearest']:.1%}")
    m3.metric("First-candidate baseline", f"{result['baselines']['first']:.1%}")
    accuracy = head_grid(((row["layer"], row["head"], row["accuracy"]) for row in result["heads"]),
                         config.n_layers, config.n_heads)
    st.plotly_chart(charts.metric_heatmap(accuracy, title=f"Accuracy on {result['n_cases']} cases", zmax=1),
                    key="coref_accuracy")
    st.dataframe(result["heads"][:10], hide_index=True, key="coref_builtin_table")


def prepended_note(tokenizer, bos: str) -> None:
    """What the sidebar's choice puts before each sentence on this model: SmolLM2's sink is
    <|endoftext|> (its BOS is a chat marker); Gemma's sink is its <bos>, which its own tokenizer always
    prepends, so "nothing" feeds Gemma text it never saw in training."""
    token = {"sink": tokenizer.sink_token, "bos": tokenizer.bos_token}.get(bos)
    st.caption(f"Before each sentence: {f'`{token}`' if token else 'nothing'} (the sidebar's choice).")
    missing_bos_warning(tokenizer, bos)
