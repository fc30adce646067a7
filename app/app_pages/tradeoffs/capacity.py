"""The capacity tabs of the tradeoffs page: depth vs width at an equal parameter budget, and dense vs
Mixture of Experts (capacity against compute), each beside what the zoo measured."""

from __future__ import annotations

import html

import streamlit as st

from app.app_pages.tradeoffs.view import TradeoffsView
from app.app_pages.tradeoffs.zoo_findings import loss_noise, zoo_table
from app.figures import charts, tradeoff_charts
from txviz.analysis.tradeoffs import tables
from txviz.analysis.tradeoffs import formulas as tr
from txviz.analysis.tradeoffs import noise, zoo_results
from txviz.loading.display_name import display_name
from txviz.model.counts import non_embedding_params


def depth_vs_width(view: TradeoffsView) -> None:
    st.markdown("Depth composes features layer on layer; width gives each layer more room. At a fixed count "
                "of non-embedding parameters N, the same budget can be few wide layers or many narrow ones. The "
                "weights cost the same ≈ 2N FLOPs per token either way, but attention over the context and the "
                "KV cache scale with L·d, which at fixed N (d ∝ 1/√L) grows like √L: depth costs memory and "
                "long-context compute.")
    st.latex(r"N \approx L\,(2\,d\,(H + H_{kv})\,d_{head} + 3\,d\,d_{ff}),\quad \text{FLOPs/token}\approx 2N + 2\,d\,V"
             r" + 4\,L\,H\,d_{head}\,n,\quad \text{KV/token} = 2\,L\,H_{kv}\,d_{head}\,b")
    options = ["the loaded model"] + (["the zoo's base"] if view.zoo_base is not None else [])
    loaded_shapes = st.radio("Shapes of", options, horizontal=True, key="to_depth_of") == "the loaded model"
    shaped = view.config if loaded_shapes else view.zoo_base
    depths = tables.depths_around(shaped.n_layers, () if loaded_shapes else (2, 7))  # 2, 7: the zoo's own depths
    rows = tr.shape_rows(tr.equal_budget_shapes(shaped, depths), context=shaped.max_seq_len // 2,
                         kv_dtype=view.dtype_name if loaded_shapes else "fp32")
    a, b = st.columns(2)
    title = f"Equal N = {non_embedding_params(shaped):,}: FLOPs/token at {shaped.max_seq_len // 2:,} keys"
    a.plotly_chart(charts.lines(depths, {"FLOPs/token": [r["flops_per_token"] for r in rows]}, mode="lines+markers",
                                title=title, x_title="layers", y_title="FLOPs per token"), key="to_depth_flops")
    b.plotly_chart(charts.lines(depths, {"KV bytes/token": [r["kv_bytes_per_token"] for r in rows]}, mode="lines+markers",
                                title="…and KV cache per token", x_title="layers", y_title="bytes"), key="to_depth_kv")
    st.dataframe(rows, hide_index=True)
    depth_in_the_zoo()


def depth_in_the_zoo() -> None:
    st.subheader("Measured in the zoo")
    rows = zoo_results.zoo_rows(zoo_results.DEPTH_WIDTH)
    zoo_table(rows, {"variant": "variant", "n_layers": "layers", "d_model": "d", "non_embedding_params": "N",
                     "flops_per_token": "FLOPs/token", "kv_bytes_per_token": "KV bytes/token (fp32)",
                     "val_loss": "val loss"})
    done = [r for r in rows if r["trained"]]
    if done:
        loss_noise(done)
    curves = zoo_results.zoo_curves([r["variant"] for r in done])
    if curves:
        st.plotly_chart(charts.lines(range(1, max(len(c["loss"]) for c in curves.values()) + 1),
                                     {name: c["loss"] for name, c in curves.items()}, log_y=True,
                                     title="Training loss, same data and steps", x_title="step", y_title="loss"),
                        key="to_depth_curves")


def dense_vs_moe(view: TradeoffsView) -> None:
    st.markdown("Splitting the FFN into E experts and running k per token multiplies the capacity (and the "
                "memory) by about E/k while the FLOPs per token stay those of k experts.")
    st.latex(r"N_{\text{total}} = N_{\text{attn}} + E\,N_{\text{ffn}},\quad "
             r"N_{\text{active}} = N_{\text{attn}} + k\,N_{\text{ffn}},\quad \text{FLOPs/token} \approx 2N_{\text{active}}")
    family = tr.expert_family(view.config, context=view.config.max_seq_len // 2)
    a, b = st.columns(2)
    # E = 1 is the dense FFN (one expert, no router): named so, not drawn as a top-k point
    title = f"{html.escape(display_name(view.loaded))}: capacity vs compute"
    labels = ["dense" if r["experts"] == 1 else f"E={r['experts']}, top-{r['top_k']}" for r in family]
    a.plotly_chart(tradeoff_charts.labelled_points([r["flops_per_token"] for r in family], [r["total_params"] for r in family],
                                          labels, log_x=True, log_y=True, title=title,
                                          x_title="FLOPs per token", y_title="total parameters"), key="to_moe_family")
    b.dataframe(tables.reference_rows(), hide_index=True)
    params, flops = tables.sparse_over_dense(tr.REFERENCES["mistral-7b"], tr.REFERENCES["mixtral-8x7b"])
    b.caption(f"Mixtral keeps Mistral 7B's attention and gives each layer 8 experts of its FFN, 2 per token: "
              f"{params:.1f}× the parameters for {flops:.1f}× the FLOPs.")
    moe_in_the_zoo()


def moe_in_the_zoo() -> None:
    st.subheader("Measured in the zoo")
    rows = zoo_results.zoo_rows(zoo_results.DENSE_MOE)
    zoo_table(rows, {"variant": "variant", "n_experts": "experts (0: dense)", "top_k": "top-k", "params": "total params",
                     "active_params": "active params", "flops_per_token": "FLOPs/token", "val_loss": "val loss",
                     "effective_experts": "effective experts"})
    done = [r for r in rows if r["trained"]]
    if done:
        estimates = loss_noise(done)
        st.plotly_chart(tradeoff_charts.labelled_points([r["params"] for r in done], [e.mean for e in estimates],
                                               [r["variant"] for r in done], y_error=[2 * e.se for e in estimates],
                                               y_range=noise.loss_axis_range(estimates),
                                               title="Capacity vs validation loss (bars: ± 2 standard errors)",
                                               x_title="total parameters", y_title="val loss (nats)"), key="to_moe_zoo")
