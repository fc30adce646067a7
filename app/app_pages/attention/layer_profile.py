"""Layer by layer: each attention pattern's mass averaged over the layer's heads, on this prompt. One
figure that depends on the prompt alone, so a head or layer switch (a rerun of the head explorer's
fragment) never redraws it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app.figures import charts

MASSES = ("first_token_mass", "prev_token", "duplicate_token", "induction", "max_weight")  # all in [0, 1]


def layer_means(table: pd.DataFrame) -> pd.DataFrame:
    """(layers × MASSES): the mean over each layer's heads; NaN where a pattern is undefined on the prompt."""
    return table.groupby("layer")[list(MASSES)].mean()


def layer_profile(table: pd.DataFrame) -> None:
    st.subheader("Layer by layer")
    st.caption("Each pattern's weight averaged over the layer's heads (the table below has every head): "
               "how the model's attention changes with depth on this prompt. A gap means the pattern is "
               "undefined here (e.g. no token repeats).")
    means = layer_means(table)
    st.plotly_chart(charts.lines(means.index, {m: means[m].to_numpy() for m in MASSES}, x_title="layer",
                                 y_title="mean weight over the layer's heads", height=300, mode="lines+markers"),
                    key="layer_profile")
