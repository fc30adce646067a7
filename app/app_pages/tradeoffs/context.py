"""The context tabs of the tradeoffs page: where attention's T² overtakes the FFN's T (FLOPs and
memory over the context length), and how the zoo's position schemes fare beyond their training context."""

from __future__ import annotations

import streamlit as st

from app.app_pages.tradeoffs.view import TradeoffsView
from app.figures import charts, tradeoff_charts
from txviz.analysis.tradeoffs import tables
from txviz.analysis.tradeoffs import formulas as tr
from txviz.analysis.tradeoffs import zoo_results
from txviz.loading.zoo import SHIPPED_ZOO


def context_length(view: TradeoffsView) -> None:
    config = view.config
    st.markdown("Per layer, naive attention compares every query with every key: QKᵀ and A·V cost 4·H·d_head·T² "
                "FLOPs and hold an H×T×T score matrix, while the FFN costs the same per token whatever the "
                "length. Doubling the context quadruples the first and doubles the second, so past some T* "
                "attention dominates.")
    st.latex(r"\underbrace{4\,H\,d_{head}\,T^2}_{\text{attention}} = \underbrace{T\,F_{\text{ffn}}}_{\text{FFN}}"
             r"\iff T^* = \frac{F_{\text{ffn}}}{4\,H\,d_{head}}")
    skip = st.toggle("Skip the masked half (a causal kernel)", key="to_ctx_causal")
    crossover = tr.attention_ffn_crossover(config, causal_skip=skip)  # where the curves below cross
    say_windows(config, crossover, skip)
    lengths = tables.powers_of_two(16, min(max(config.max_seq_len, 4 * int(crossover or 0), 1024), 1 << 20))
    costs = tr.context_costs(config, lengths, element_bytes=view.loaded.dtype.itemsize, causal_skip=skip)
    m1, m2 = st.columns(2)
    m1.metric("Attention overtakes the FFN at",
              "never (sliding window)" if crossover is None else f"T* ≈ {crossover:,.0f} tokens",
              help="Where the attention curve below crosses the FFN's: attention averaged over the layers, "
                   "each layer's keys capped by its window.")
    m2.metric("Context of this model", f"{config.max_seq_len:,} tokens")
    a, b = st.columns(2)
    flops = charts.lines(lengths, {"attention (QKᵀ, A·V)": costs["attention_flops"], "FFN": costs["ffn_flops"],
                                   "Q/K/V/O projections": costs["projection_flops"]}, log_x=True, log_y=True,
                         title="FLOPs of one layer over T tokens", x_title="tokens T", y_title="FLOPs")
    if crossover is not None:
        flops.add_vline(x=crossover, line_dash="dot", annotation_text="T*")
    a.plotly_chart(flops, key="to_ctx_flops")
    b.plotly_chart(charts.lines(lengths, tables.context_memory_mib(config, lengths, costs["score_bytes"], view.dtype_name),
                                log_x=True, log_y=True, title="Memory over T tokens (batch 1)", x_title="tokens T",
                                y_title="MiB"), key="to_ctx_memory")
    if view.zoo_base is not None:
        zoo_crossover(view.zoo_base, skip)


def say_windows(config, crossover: float | None, skip: bool) -> None:
    """On a model with windowed layers, what the windows do to T*: the formula above is a global layer's."""
    windowed = tr.windowed_layers(config)
    if not windowed:
        return
    local = sum(windowed.values())
    sizes = " and ".join(f"{count} at {window:,}" for window, count in sorted(windowed.items()))
    full = config.n_layers - local
    alone = tr.global_layer_crossover(config, causal_skip=skip)
    where = ("so attention never overtakes the FFN: its cost per token stops growing once T passes the window"
             if crossover is None else
             f"so per layer on average attention overtakes the FFN only at **T\\* ≈ {crossover:,.0f}**: past the "
             f"windows only the {full} global layer{'s' if full != 1 else ''} keep{'s' if full == 1 else ''} "
             "growing, and they must make up for the others")
    st.info(f"{local} of this model's {config.n_layers} layers see only a window of keys ({sizes}): each query "
            "there is compared with at most that many keys, so their attention grows like T, not T². "
            f"A global layer alone crosses at F/(4·H·d_head) ≈ {alone:,.0f} tokens; {where}. The curves and "
            "the dotted line below are that average over the layers.")


def zoo_crossover(base, skip: bool) -> None:
    """Where T* falls for the zoo's base: inside or beyond the context it trained on."""
    cross = tr.attention_ffn_crossover(base, causal_skip=skip)
    st.caption(f"In the zoo's base (context {base.max_seq_len}), T* ≈ {cross:,.0f}: its attention never "
               "outweighs its FFN while training." if cross and cross > base.max_seq_len else
               f"In the zoo's base, T* ≈ {cross:,.0f} tokens, inside its {base.max_seq_len}-token context.")


def positions_beyond(view: TradeoffsView) -> None:
    rows = zoo_results.extrapolation_rows()
    trained_context = next((r["context"] for r in rows if r["trained"]), 128)
    st.markdown(f"Trained on {trained_context}-token windows, each zoo model is scored on windows of 1×, 2× and 4× "
                "that length. RoPE, ALiBi and no positions need nothing new for longer inputs; a learned table has "
                f"no row past position {trained_context - 1}, so it cannot be run there at all.")
    st.latex(r"\text{RoPE: } q_m\cdot k_n \text{ depends on } m-n;\quad \text{ALiBi: } s_{ij} = q_i\cdot k_j - m_h\,(i-j);"
             r"\quad \text{learned: } x_i + p_i,\ i < T_{train}")
    done = [r for r in rows if r["trained"]]
    if done:
        context = done[0]["context"]
        st.plotly_chart(tradeoff_charts.grouped_bars([f"{r['variant']} ({r['positions']})" for r in done],
                                            {f"1× ({context})": [r["loss_1x"] for r in done],
                                             f"2× ({2 * context})": [r["loss_2x"] for r in done],
                                             f"4× ({4 * context})": [r["loss_4x"] for r in done]},
                                            title="Validation loss by window length", y_title="nats"), key="to_pos_zoo")
        st.dataframe(tables.extrapolation_table(rows), hide_index=True)
    missing = tables.missing_variants(rows)
    if missing:
        st.caption("Not in the zoo yet: " + ", ".join(missing) + ".")
    st.caption(f"The loaded model uses {view.config.positions} positions; the zoo's files are in the project's "
               f"`{SHIPPED_ZOO.parent.name}/{SHIPPED_ZOO.name}` folder.")
