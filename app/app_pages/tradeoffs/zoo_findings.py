"""What the lab's zoo measured, as the tradeoffs tabs show it: a table of the trained variants (naming
those not trained yet) and their losses' evaluation noise, in words."""

from __future__ import annotations

import streamlit as st

from app import cache
from txviz.analysis.tradeoffs import tables
from txviz.analysis.tradeoffs import noise


def zoo_table(rows: list[dict], columns: dict[str, str]) -> None:
    """The trained rows with ``columns`` renamed; the missing variants named below."""
    done = tables.trained_table(rows, columns)
    if done:
        st.dataframe(done, hide_index=True)
    missing = tables.missing_variants(rows)
    if missing:
        st.caption("Not in the zoo yet: " + ", ".join(missing) + " (`txviz lab train " + " ".join(missing) + "`).")


def loss_noise(done: list[dict]) -> list[noise.LossEstimate]:
    """The trained variants' losses with their evaluation noise, and the verdict in words."""
    estimates, paired = tables.loss_noise({r["variant"]: cache.zoo_window_losses(r["variant"]) for r in done})
    st.markdown(noise.noise_finding(estimates, paired, n_seeds=1))  # the zoo keeps one run per variant
    return estimates
