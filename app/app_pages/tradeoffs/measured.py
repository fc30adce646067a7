"""The tabs measured on this machine, on a click, and kept for every visitor once run: FlashAttention's
fused kernel against the tutorial's naive attention, and reading a text in one parallel pass against one
token at a time."""

from __future__ import annotations

import streamlit as st
import torch

from app import cache
from app.app_pages.tradeoffs.view import TradeoffsView
from app.figures import charts
from app.ui.widgets import plain
from txviz.analysis.tradeoffs import tables
from txviz.analysis.tradeoffs import timing
from txviz.loading.display_name import display_name


def flash_attention(view: TradeoffsView) -> None:
    config = view.config
    st.markdown("FlashAttention computes exactly softmax(QKᵀ/√d)V, but tile by tile: a block of queries meets "
                "a block of keys, the softmax is kept as a running maximum and sum, and the T×T matrix is never "
                "stored. Below, the seed's naive code against PyTorch's fused `scaled_dot_product_attention`, "
                f"with this model's {config.n_heads} heads of width {config.head_dim}, on random inputs.")
    st.latex(r"\text{naive: } O(H\,T^2) \text{ memory} \qquad \text{tiled: } O(H\,T\,d_{head}) \text{ memory, same output}")
    longest = st.select_slider("Longest sequence", [512, 1024, 2048, 4096, 8192], value=2048, key="to_flash_max")
    lengths = tuple(tables.powers_of_two(128, int(longest)))
    device, budget = str(view.loaded.device), cache.limits().memory_budget_bytes
    key = ("flash", config.n_heads, config.head_dim, lengths, device, budget)
    result = cache.measured(key)
    if st.button("Measure on this machine", key="to_flash_run") and result is None:
        result = cache.measure(key, lambda progress: timing.attention_benchmark(
            lengths, config.n_heads, config.head_dim, device=device, max_naive_bytes=budget, progress=progress),
            "Timing naive attention and SDPA…")
    if result is None:
        st.caption(f"Runs {len(lengths)} lengths up to {int(longest):,} tokens, a few seconds to a minute; "
                   "the result is kept for every visitor.")
    else:
        show_benchmark(result, budget)


def show_benchmark(result, budget: int) -> None:
    table = tables.benchmark_table(result)
    st.dataframe(table, hide_index=True)
    a, b = st.columns(2)
    a.plotly_chart(charts.lines(table["tokens"], {"naive": table["naive ms"], "SDPA": table["SDPA ms"]}, log_x=True,
                                log_y=True, mode="lines+markers", title="Time", x_title="tokens", y_title="ms"),
                   key="to_flash_time")
    b.plotly_chart(charts.lines(table["tokens"], {"naive (measured peak)": table["naive peak MiB"],
                                                  "SDPA (measured peak)": table["SDPA peak MiB"],
                                                  "one score matrix (analytic)": table["one score matrix MiB (analytic)"]},
                                log_x=True, log_y=True, mode="lines+markers", title="Peak memory during the call",
                                x_title="tokens", y_title="MiB"), key="to_flash_memory")
    runs = max(len(r.sdpa_runs) for r in result)
    notes = tables.noise_notes(result)
    st.caption(f"Time: the median of {runs} runs of each, naive and SDPA called in turn so that a busy moment "
               "slows both; the table gives the fastest and slowest run. "
               + (_sentence("; ".join(notes)) if notes else
                  "At every length the two methods' runs are apart, and each method's runs grow with the length."))
    st.caption(f"Memory: {result[0].memory_method}, output included. Same outputs at every length "
               "(torch.testing.assert_close). Naive runs are skipped where three score matrices would exceed "
               f"the memory budget ({budget / 2**30:.1f} GiB). {torch.get_num_threads()} CPU threads.")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


# a single run of a few-millisecond pass read 9 ms at 8 tokens and 450 ms at 16 on a busy machine in chromium
READING_REPEATS = 3


def parallel_vs_sequential(view: TradeoffsView) -> None:
    st.markdown("A recurrent network must finish token t before it can start token t+1. A transformer can "
                "read the same way — one token per step, carrying its KV cache like a hidden state — or read "
                "all T tokens in one pass of large matrix products, which is what makes training on long "
                "sequences fast. Both readings give the same final logits.")
    st.latex(r"\text{RNN: } h_t = f(h_{t-1}, x_t)\ \ (T \text{ steps in sequence})\qquad "
             r"\text{attention: } \mathrm{softmax}(QK^\top/\sqrt{d})\,V \ \ (\text{one step for all } T)")
    options = tables.reading_lengths(min(view.config.max_seq_len, cache.limits().max_prompt_tokens, 512))
    longest = st.select_slider("Longest sequence", options, value=options[min(1, len(options) - 1)], key="to_rnn_max")
    lengths = tuple(tables.powers_of_two(4, int(longest)))
    key = ("rnn", view.source, lengths, READING_REPEATS)
    result = cache.measured(key)
    if st.button("Measure on the loaded model", key="to_rnn_run") and result is None:
        result = cache.measure(key, lambda progress: timing.parallel_vs_sequential(
            view.loaded.model, lengths, repeats=READING_REPEATS, progress=progress),
            "Reading in parallel and token by token…")
    if result is None:
        st.caption(f"Reads {len(lengths)} lengths up to {int(longest)} tokens both ways with "
                   f"{plain(display_name(view.loaded))}.")
        return
    st.plotly_chart(charts.lines([r.tokens for r in result], tables.reading_times_ms(result), log_x=True, log_y=True,
                                 mode="lines+markers", title="Time to read T tokens", x_title="tokens T", y_title="ms"),
                    key="to_rnn_time")
    st.dataframe(tables.reading_table(result), hide_index=True)
    st.caption(f"Each time is the median of {READING_REPEATS} runs: one run of a short pass is at the mercy of "
               "whatever else the machine does at that moment.")
