"""The "Balanced vs unbalanced" tab: each zoo MoE trained twice, identical but for the balancing loss,
run on the same held-out stories: how many experts each really uses, per layer and over training."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.moe.view import MoeView
from app.figures import charts, tradeoff_charts
from app.services.zoo import trained
from txviz.analysis.moe import routing as moe
from txviz.analysis.moe import tables

ROUTINGS = {"top-1": "top-1 (Switch)", "top-2": "top-2 (Mixtral)"}


def balance_tab(view: MoeView) -> None:
    st.markdown(
        "The zoo trains each MoE twice, identical but for the balancing loss (weight 0.01, as in Switch). "
        "Both are run below on the same held-out stories the models never trained on.")
    findings()
    kind = st.segmented_control("Routing", list(ROUTINGS), key="moe_pair", format_func=ROUTINGS.get)
    k = (kind or "top-1")[-1]
    pair = [f"moe_top{k}", f"moe_top{k}_balanced"]
    present = trained(pair)
    missing = [name for name in pair if name not in present]
    if missing:
        st.info("Not trained yet: " + ", ".join(missing) + f" (`txviz lab train {' '.join(missing)}`).")
    if present:
        compare(present)


def findings() -> None:
    """Each routing's balanced-vs-unbalanced comparison in words, from the effective experts measured live."""
    for k in (1, 2):
        pair = [f"moe_top{k}", f"moe_top{k}_balanced"]
        if trained(pair) == pair:
            without, with_loss = (cache.zoo_routing(name) for name in pair)
            st.markdown("- " + moe.balance_finding(k, without.n_experts, without.effective_experts.tolist(),
                                                    with_loss.effective_experts.tolist()))


def compare(names: list[str]) -> None:
    """The trained variants among ``names`` side by side on the same held-out tokens."""
    measured = {name: cache.zoo_routing(name) for name in names}
    st.dataframe(tables.balance_rows(measured), hide_index=True)
    st.caption(f"Measured live on {next(iter(measured.values())).n_tokens:,} held-out tokens; val loss from the "
               "lab's eval.json.")
    for column, (name, m) in zip(st.columns(len(measured)), measured.items()):
        column.plotly_chart(tradeoff_charts.expert_load_bars(m.load.numpy(), title=name), key=f"moe_load_{name}")
    c1, c2 = st.columns(2)
    c1.plotly_chart(charts.lines(list(next(iter(measured.values())).layers),
                                 {n: m.effective_experts.numpy() for n, m in measured.items()}, mode="lines+markers",
                                 title="Effective experts per layer", x_title="layer", y_title="experts"),
                    key="moe_effective")
    aux = tables.aux_loss_curves(list(measured))
    if aux:
        c2.plotly_chart(charts.lines(range(1, max(len(v) for v in aux.values()) + 1), aux, x_title="step",
                                     title="Balancing loss during training (1 = even)", y_title="aux loss"),
                        key="moe_aux_curve")
