"""Every head scored on the built-in labeled set of pronoun sentences (Clark et al. 2019), on request."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import charts
from app.ui import state
from app.ui.widgets import missing_bos_warning, plain
from txviz.analysis.coref.table import head_grid
from txviz.limits import format_seconds

RUN = state.StoppableRun("coref_set")


def builtin_section(source: str, config, bos: str) -> None:
    st.subheader("Scored on the built-in labeled set")
    st.markdown("240 sentences written for txviz (gender, number, animacy), balanced so that always picking the "
                "nearest candidate, or the first, scores exactly 50%. A head is right when the answer gets more "
                "attention from the pronoun than any other candidate (Clark et al. 2019).")
    prepended_note(cache.get_model(source).tokenizer, bos)
    result = cache.coref_kept(source, bos)  # scored by any session for this model and policy: shown at no cost
    if result is None:
        result = _run_button(source, bos)
    if result is None:
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


def _run_button(source: str, bos: str) -> dict | None:
    """The button, and the scoring under a bar with its own Stop; None until it is pressed (a model or
    policy switch never scores the set by itself: each pair is scored on its own click)."""
    stopped = RUN.stopped()
    if stopped is not None:
        st.info(f"Stopped after {stopped['seconds']:.0f} s, at {stopped['message']} ({stopped['fraction']:.0%} of the "
                "sentences). Nothing of it was kept: the accuracies need every sentence. Score again to see them.")
    seconds = cache.coref_seconds(source, bos)
    st.caption(f"About {format_seconds(seconds)} here now: every sentence runs once, up to its pronoun.")
    if not st.button("Score every head on the built-in set", key="coref_builtin"):
        return None
    try:
        with RUN.running("Scoring every head on the built-in set", seconds) as progress:
            return cache.get_coref_evaluation(source, bos, progress)
    except ValueError as error:  # e.g. a BOS policy this model's tokenizer has no token for
        st.warning(f"Cannot score the built-in set: {plain(error)}")
        return None


def prepended_note(tokenizer, bos: str) -> None:
    """What the sidebar's choice puts before each sentence on this model: SmolLM2's sink is
    <|endoftext|> (its BOS is a chat marker); Gemma's sink is its <bos>, which its own tokenizer always
    prepends, so "nothing" feeds Gemma text it never saw in training."""
    token = {"sink": tokenizer.sink_token, "bos": tokenizer.bos_token}.get(bos)
    st.caption(f"Before each sentence: {f'“{plain(token)}”' if token else 'nothing'} (the sidebar's choice).")
    missing_bos_warning(tokenizer, bos)
