"""The "Learned position table" tab: how alike the rows of a learned absolute position table are, their
norms, and where the table ends (no row past the training context)."""

from __future__ import annotations

import streamlit as st

from app.app_pages.positions.view import PositionsView
from app.figures import charts
from txviz.analysis.positions import measured as pos


def table_tab(view: PositionsView) -> None:
    table = view.loaded.model.positions.weight.detach().float().cpu()  # (P, d)
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
