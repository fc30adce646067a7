"""Design tradeoffs page (seed §0, §6): each choice as a formula on the loaded model's config, beside
the lab zoo's measured losses, and two measured on this machine (FlashAttention, parallel reading)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st
import torch

from app import resources
from app.figures import charts
from app.ui import sidebar
from app import zoo_resources as zoo
from txviz.analysis import tradeoffs as tr
from txviz.analysis.memory import count_active_params, count_params, kind_variants, kv_bytes_per_token
from txviz.analysis.moe import flops_per_token
from txviz.loading.zoo import SHIPPED_ZOO, read_txviz_config

st.title("Design tradeoffs")
st.markdown(
    "Within a budget of parameters, compute and memory, every architecture choice buys something and "
    "pays for it elsewhere. Each tab puts one choice in a formula applied to the loaded model and, beside "
    "it, what the lab's zoo measured: tiny models trained identically except for that one choice.")

source, loaded = sidebar.current()
config = loaded.config
dtype_name = {4: "fp32", 2: "bf16"}.get(loaded.dtype.itemsize, "fp32")
zoo_base = read_txviz_config(SHIPPED_ZOO / "base") if zoo.trained(["base"]) else None


def zoo_table(rows: list[dict], columns: dict[str, str]) -> None:
    """The trained rows with ``columns`` renamed; the missing variants named below."""
    done = [r for r in rows if r["trained"]]
    if done:
        st.dataframe(pd.DataFrame([{label: r[key] for key, label in columns.items()} for r in done]), hide_index=True)
    missing = [r["variant"] for r in rows if not r["trained"]]
    if missing:
        st.caption("Not in the zoo yet: " + ", ".join(missing) + " (`txviz lab train " + " ".join(missing) + "`).")


def powers_of_two(low: int, high: int) -> list[int]:
    return [2 ** e for e in range(int(np.log2(low)), int(np.log2(high)) + 1)]


def loss_noise(done: list[dict]) -> list[tr.LossEstimate]:
    """The trained variants' losses with their evaluation noise, and the verdict in words."""
    windows = {r["variant"]: zoo.zoo_window_losses(r["variant"]) for r in done}
    estimates = [tr.loss_estimate(name, losses) for name, losses in windows.items()]
    paired = {(a, b): tr.paired_difference(windows[a], windows[b]) for a in windows for b in windows if a != b}
    st.markdown(tr.noise_finding(estimates, paired, n_seeds=1))  # the zoo keeps one run per variant
    return estimates


def kv_noise(done: list[dict]) -> None:
    """The zoo's attention kinds with their evaluation noise: error bars, an honest axis, and the verdict in words."""
    estimates = loss_noise(done)
    st.plotly_chart(charts.labelled_points([r["kv_bytes_per_token"] for r in done], [e.mean for e in estimates],
                                           [r["variant"] for r in done], y_error=[2 * e.se for e in estimates],
                                           y_range=tr.loss_axis_range(estimates),
                                           title="KV cache vs validation loss (bars: ± 2 standard errors)",
                                           x_title="KV bytes per token (fp32)", y_title="val loss (nats)"),
                    key="to_kv_zoo")
    st.caption("Standard errors over the held-out windows the lab's evaluation scores (their mean is eval.json's "
               "val loss); the y-axis spans at least 5 % of the loss, so a 0.1 % difference looks like one.")


def depth_vs_width() -> None:
    st.markdown("Depth composes features layer on layer; width gives each layer more room. At a fixed count "
                "of non-embedding parameters N, the same budget can be few wide layers or many narrow ones. The "
                "weights cost the same ≈ 2N FLOPs per token either way, but attention over the context and the "
                "KV cache scale with L·d, which at fixed N (d ∝ 1/√L) grows like √L: depth costs memory and "
                "long-context compute.")
    st.latex(r"N \approx L\,(2\,d\,(H + H_{kv})\,d_{head} + 3\,d\,d_{ff}),\quad \text{FLOPs/token}\approx 2N + 2\,d\,V"
             r" + 4\,L\,H\,d_{head}\,n,\quad \text{KV/token} = 2\,L\,H_{kv}\,d_{head}\,b")
    options = ["the loaded model"] + (["the zoo's base"] if zoo_base is not None else [])
    of = st.radio("Shapes of", options, horizontal=True, key="to_depth_of")
    shaped = config if of == "the loaded model" else zoo_base
    depths = sorted({max(1, shaped.n_layers // 4), max(1, shaped.n_layers // 2), shaped.n_layers, 2 * shaped.n_layers,
                     4 * shaped.n_layers} | ({2, 7} if of != "the loaded model" else set()))
    rows = tr.shape_rows(tr.equal_budget_shapes(shaped, depths), context=shaped.max_seq_len // 2,
                         kv_dtype=dtype_name if of == "the loaded model" else "fp32")
    a, b = st.columns(2)
    title = f"Equal N = {tr.non_embedding_params(shaped):,}: FLOPs/token at {shaped.max_seq_len // 2:,} keys"
    a.plotly_chart(charts.lines(depths, {"FLOPs/token": [r["flops_per_token"] for r in rows]}, mode="lines+markers",
                                title=title, x_title="layers", y_title="FLOPs per token"), key="to_depth_flops")
    b.plotly_chart(charts.lines(depths, {"KV bytes/token": [r["kv_bytes_per_token"] for r in rows]}, mode="lines+markers",
                                title="…and KV cache per token", x_title="layers", y_title="bytes"), key="to_depth_kv")
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    st.subheader("Measured in the zoo")
    depth_rows = tr.zoo_rows(tr.DEPTH_WIDTH)
    zoo_table(depth_rows, {"variant": "variant", "n_layers": "layers", "d_model": "d", "non_embedding_params": "N",
                           "flops_per_token": "FLOPs/token", "kv_bytes_per_token": "KV bytes/token (fp32)",
                           "val_loss": "val loss"})
    if any(r["trained"] for r in depth_rows):
        loss_noise([r for r in depth_rows if r["trained"]])
    curves = tr.zoo_curves([r["variant"] for r in depth_rows if r["trained"]])
    if curves:
        st.plotly_chart(charts.lines(range(1, max(len(c["loss"]) for c in curves.values()) + 1),
                                     {name: c["loss"] for name, c in curves.items()}, log_y=True,
                                     title="Training loss, same data and steps", x_title="step", y_title="loss"),
                        key="to_depth_curves")

def dense_vs_moe() -> None:
    st.markdown("Splitting the FFN into E experts and running k per token multiplies the capacity (and the "
                "memory) by about E/k while the FLOPs per token stay those of k experts.")
    st.latex(r"N_{\text{total}} = N_{\text{attn}} + E\,N_{\text{ffn}},\quad "
             r"N_{\text{active}} = N_{\text{attn}} + k\,N_{\text{ffn}},\quad \text{FLOPs/token} \approx 2N_{\text{active}}")
    family = tr.expert_family(config, context=config.max_seq_len // 2)
    a, b = st.columns(2)
    title = f"{resources.display_name(loaded)}: capacity vs compute, top-{family[-1]['top_k']}"
    a.plotly_chart(charts.labelled_points([r["flops_per_token"] for r in family], [r["total_params"] for r in family],
                                          [f"E={r['experts']}" for r in family], log_x=True, log_y=True, title=title,
                                          x_title="FLOPs per token", y_title="total parameters"), key="to_moe_family")
    references = [{"model": c.name, "total params": count_params(c), "active params": count_active_params(c),
                   "FLOPs/token (4k context)": flops_per_token(c, 4096), "source": c.source}
                  for c in tr.REFERENCES.values()]
    b.dataframe(pd.DataFrame(references), hide_index=True)
    dense, sparse = references
    b.caption(f"Mixtral keeps Mistral 7B's attention and gives each layer 8 experts of its FFN, 2 per token: "
              f"{sparse['total params'] / dense['total params']:.1f}× the parameters for "
              f"{sparse['FLOPs/token (4k context)'] / dense['FLOPs/token (4k context)']:.1f}× the FLOPs.")
    st.subheader("Measured in the zoo")
    moe_rows = tr.zoo_rows(tr.DENSE_MOE)
    zoo_table(moe_rows, {"variant": "variant", "n_experts": "experts (0: dense)", "top_k": "top-k", "params": "total params",
                         "active_params": "active params", "flops_per_token": "FLOPs/token", "val_loss": "val loss",
                         "effective_experts": "effective experts"})
    done = [r for r in moe_rows if r["trained"]]
    if done:
        estimates = loss_noise(done)
        st.plotly_chart(charts.labelled_points([r["params"] for r in done], [e.mean for e in estimates],
                                               [r["variant"] for r in done], y_error=[2 * e.se for e in estimates],
                                               y_range=tr.loss_axis_range(estimates),
                                               title="Capacity vs validation loss (bars: ± 2 standard errors)",
                                               x_title="total parameters", y_title="val loss (nats)"), key="to_moe_zoo")

def attention_kinds() -> None:
    st.markdown("Every query head can keep its own keys and values (MHA), share them within a group (GQA) "
                "or all share one pair (MQA). The cache shrinks with the number of KV heads; the question is "
                "what quality it costs.")
    st.latex(r"\text{KV bytes/token} = 2\,L\,H_{kv}\,d_{head}\,b")
    try:
        kinds = kind_variants(config)
        st.dataframe(pd.DataFrame([{"kind": kind, "KV heads": m.kv_heads,
                                    f"KV bytes/token ({dtype_name})": kv_bytes_per_token(m, dtype_name)}
                                   for kind, m in kinds.items()]), hide_index=True)
    except ValueError as error:
        st.info(str(error))
    st.subheader("Measured in the zoo")
    kv_rows = tr.zoo_rows(tr.ATTENTION_KINDS)
    zoo_table(kv_rows, {"variant": "variant", "n_kv_heads": "KV heads", "kv_bytes_per_token": "KV bytes/token (fp32)",
                        "params": "params", "val_loss": "val loss", "val_loss_4x": "val loss at 4× context"})
    done = [r for r in kv_rows if r["trained"]]
    if done:
        kv_noise(done)

def context_length() -> None:
    st.markdown("Per layer, naive attention compares every query with every key: QKᵀ and A·V cost 4·H·d_head·T² "
                "FLOPs and hold an H×T×T score matrix, while the FFN costs the same per token whatever the "
                "length. Doubling the context quadruples the first and doubles the second, so past some T* "
                "attention dominates.")
    st.latex(r"\underbrace{4\,H\,d_{head}\,T^2}_{\text{attention}} = \underbrace{T\,F_{\text{ffn}}}_{\text{FFN}}"
             r"\iff T^* = \frac{F_{\text{ffn}}}{4\,H\,d_{head}}")
    skip = st.toggle("Skip the masked half (a causal kernel)", key="to_ctx_causal")
    crossover = tr.attention_ffn_crossover(config, causal_skip=skip)
    high = max(config.max_seq_len, 4 * int(crossover or 0), 1024)
    lengths = powers_of_two(16, min(high, 1 << 20))
    costs = tr.context_costs(config, lengths, element_bytes=loaded.dtype.itemsize, causal_skip=skip)
    m1, m2 = st.columns(2)
    m1.metric("Attention overtakes the FFN at",
              "never (sliding window)" if crossover is None else f"T* ≈ {crossover:,.0f} tokens")
    m2.metric("Context of this model", f"{config.max_seq_len:,} tokens")
    a, b = st.columns(2)
    flops = charts.lines(lengths, {"attention (QKᵀ, A·V)": costs["attention_flops"], "FFN": costs["ffn_flops"],
                                   "Q/K/V/O projections": costs["projection_flops"]}, log_x=True, log_y=True,
                         title="FLOPs of one layer over T tokens", x_title="tokens T", y_title="FLOPs")
    if crossover is not None:
        flops.add_vline(x=crossover, line_dash="dot", annotation_text="T*")
    a.plotly_chart(flops, key="to_ctx_flops")
    b.plotly_chart(charts.lines(lengths, {"one layer's score matrix": np.array(costs["score_bytes"]) / 2**20,
                                          "KV cache, all layers": np.array([kv_bytes_per_token(config, dtype_name) * t
                                                                            for t in lengths]) / 2**20},
                                log_x=True, log_y=True, title="Memory over T tokens (batch 1)", x_title="tokens T",
                                y_title="MiB"), key="to_ctx_memory")
    if zoo_base is not None:
        zoo_cross = tr.attention_ffn_crossover(zoo_base, causal_skip=skip)
        st.caption(f"In the zoo's base (context {zoo_base.max_seq_len}), T* ≈ {zoo_cross:,.0f}: its attention never "
                   "outweighs its FFN while training." if zoo_cross and zoo_cross > zoo_base.max_seq_len else
                   f"In the zoo's base, T* ≈ {zoo_cross:,.0f} tokens, inside its {zoo_base.max_seq_len}-token context.")

def flash_attention() -> None:
    st.markdown("FlashAttention computes exactly softmax(QKᵀ/√d)V, but tile by tile: a block of queries meets "
                "a block of keys, the softmax is kept as a running maximum and sum, and the T×T matrix is never "
                "stored. Below, the seed's naive code against PyTorch's fused `scaled_dot_product_attention`, "
                f"with this model's {config.n_heads} heads of width {config.head_dim}, on random inputs.")
    st.latex(r"\text{naive: } O(H\,T^2) \text{ memory} \qquad \text{tiled: } O(H\,T\,d_{head}) \text{ memory, same output}")
    longest = st.select_slider("Longest sequence", [512, 1024, 2048, 4096, 8192], value=2048, key="to_flash_max")
    flash_lengths = tuple(powers_of_two(128, int(longest)))
    device = str(loaded.device)
    budget = resources.limits().memory_budget_bytes
    key = ("flash", config.n_heads, config.head_dim, flash_lengths, device, budget)
    result = zoo.measured(key)
    if st.button("Measure on this machine", key="to_flash_run") and result is None:
        result = zoo.measure(key, lambda progress: tr.attention_benchmark(
            flash_lengths, config.n_heads, config.head_dim, device=device, max_naive_bytes=budget, progress=progress),
            "Timing naive attention and SDPA…")
    if result is None:
        st.caption(f"Runs {len(flash_lengths)} lengths up to {int(longest):,} tokens, a few seconds to a minute; "
                   "the result is kept for every visitor.")
    else:
        table = pd.DataFrame([{"tokens": r.tokens, "naive ms": None if r.naive_s is None else r.naive_s * 1e3,
                               "SDPA ms": r.sdpa_s * 1e3, "speedup": r.speedup,
                               "naive peak MiB": None if r.naive_peak_bytes is None else r.naive_peak_bytes / 2**20,
                               "SDPA peak MiB": r.sdpa_peak_bytes / 2**20,
                               "one score matrix MiB (analytic)": r.score_matrix_bytes / 2**20,
                               "max |naive − SDPA|": r.max_abs_diff} for r in result])
        st.dataframe(table, hide_index=True)
        a, b = st.columns(2)
        ts = table["tokens"].tolist()
        a.plotly_chart(charts.lines(ts, {"naive": table["naive ms"], "SDPA": table["SDPA ms"]}, log_x=True, log_y=True,
                                    mode="lines+markers", title="Time", x_title="tokens", y_title="ms"),
                       key="to_flash_time")
        b.plotly_chart(charts.lines(ts, {"naive (measured peak)": table["naive peak MiB"],
                                         "SDPA (measured peak)": table["SDPA peak MiB"],
                                         "one score matrix (analytic)": table["one score matrix MiB (analytic)"]},
                                    log_x=True, log_y=True, mode="lines+markers", title="Peak memory during the call",
                                    x_title="tokens", y_title="MiB"), key="to_flash_memory")
        st.caption(f"Memory: {result[0].memory_method}, output included. Same outputs at every length "
                   "(torch.testing.assert_close). Naive runs are skipped where three score matrices would exceed "
                   f"the memory budget ({budget / 2**30:.1f} GiB). {torch.get_num_threads()} CPU threads.")

def parallel_vs_sequential() -> None:
    st.markdown("A recurrent network must finish token t before it can start token t+1. A transformer can "
                "read the same way — one token per step, carrying its KV cache like a hidden state — or read "
                "all T tokens in one pass of large matrix products, which is what makes training on long "
                "sequences fast. Both readings give the same final logits.")
    st.latex(r"\text{RNN: } h_t = f(h_{t-1}, x_t)\ \ (T \text{ steps in sequence})\qquad "
             r"\text{attention: } \mathrm{softmax}(QK^\top/\sqrt{d})\,V \ \ (\text{one step for all } T)")
    cap = min(config.max_seq_len, resources.limits().max_prompt_tokens, 512)
    options = [t for t in (16, 32, 64, 128, 256, 512) if t <= cap] or [cap]
    longest = st.select_slider("Longest sequence", options, value=options[min(1, len(options) - 1)], key="to_rnn_max")
    rnn_lengths = tuple(t for t in powers_of_two(4, int(longest)))
    key = ("rnn", source, rnn_lengths)
    result = zoo.measured(key)
    if st.button("Measure on the loaded model", key="to_rnn_run") and result is None:
        result = zoo.measure(key, lambda progress: tr.parallel_vs_sequential(loaded.model, rnn_lengths, progress=progress),
                             "Reading in parallel and token by token…")
    if result is None:
        st.caption(f"Reads {len(rnn_lengths)} lengths up to {int(longest)} tokens both ways with "
                   f"{resources.display_name(loaded)}.")
    else:
        table = pd.DataFrame([r.to_dict() for r in result])
        ts = table["tokens"].tolist()
        st.plotly_chart(charts.lines(ts, {"one parallel pass": table["parallel_s"] * 1e3,
                                          "one token at a time (KV cache)": table["sequential_s"] * 1e3},
                                     log_x=True, log_y=True, mode="lines+markers", title="Time to read T tokens",
                                     x_title="tokens T", y_title="ms"), key="to_rnn_time")
        st.dataframe(table.rename(columns={"ratio": "sequential ÷ parallel", "max_abs_diff": "max |Δ last logits|"}),
                     hide_index=True)

def positions_beyond() -> None:
    rows = tr.extrapolation_rows()
    trained_context = next((r["context"] for r in rows if r["trained"]), 128)
    st.markdown(f"Trained on {trained_context}-token windows, each zoo model is scored on windows of 1×, 2× and 4× "
                "that length. RoPE, ALiBi and no positions need nothing new for longer inputs; a learned table has "
                f"no row past position {trained_context - 1}, so it cannot be run there at all.")
    st.latex(r"\text{RoPE: } q_m\cdot k_n \text{ depends on } m-n;\quad \text{ALiBi: } s_{ij} = q_i\cdot k_j - m_h\,(i-j);"
             r"\quad \text{learned: } x_i + p_i,\ i < T_{train}")
    done = [r for r in rows if r["trained"]]
    if done:
        context = done[0]["context"]
        st.plotly_chart(charts.grouped_bars([f"{r['variant']} ({r['positions']})" for r in done],
                                            {f"1× ({context})": [r["loss_1x"] for r in done],
                                             f"2× ({2 * context})": [r["loss_2x"] for r in done],
                                             f"4× ({4 * context})": [r["loss_4x"] for r in done]},
                                            title="Validation loss by window length", y_title="nats"), key="to_pos_zoo")
        st.dataframe(pd.DataFrame([{k: v for k, v in r.items() if k != "trained"} for r in done]), hide_index=True)
    missing = [r["variant"] for r in rows if not r["trained"]]
    if missing:
        st.caption("Not in the zoo yet: " + ", ".join(missing) + ".")
    st.caption(f"The loaded model uses {config.positions} positions; zoo files in {SHIPPED_ZOO}.")


TABS = ["Depth vs width", "Dense vs MoE", "MHA / GQA / MQA", "Context length", "FlashAttention",
        "Parallel vs sequential", "Positions beyond training"]
VIEWS = (depth_vs_width, dense_vs_moe, attention_kinds, context_length, flash_attention, parallel_vs_sequential,
         positions_beyond)
# only the open tab runs (the zoo's window losses, the model's shapes): a click on another reruns the page
for tab, view in zip(st.tabs(TABS, key="tradeoffs_tab", on_change="rerun"), VIEWS):
    with tab:
        if tab.open is not False:  # None: state tracking off (never here)
            view()
