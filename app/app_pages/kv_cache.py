"""KV cache and memory page (seed §4.1, §5.2): watch the real cache grow during generation, compare
cached and uncached decoding, and weigh MHA / GQA / MQA."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import charts, resources, sidebar, state
from txviz.model.kv_cache import kv_cache_bytes

st.title("KV cache & memory")
st.markdown(
    "A decoder generates one token at a time, and the keys and values of earlier tokens never change. "
    "So they are kept — the **KV cache** — and each new token only computes its own q, k, v and attends "
    "to the cache: O(n) work per step instead of recomputing all n tokens. The price is memory that "
    "grows with every token, in every layer, for every KV head. Sharing KV heads between query heads "
    "(GQA, or one for all: MQA) divides it.")
st.latex(r"\text{KV bytes} = 2 \times L \times H_{kv} \times d_{head} \times T \times B \times \text{bytes per element}")

source, loaded = sidebar.current()
config = loaded.config
prompt, bos = state.get("prompt"), state.get("bos")
element = loaded.dtype.itemsize

tab_grow, tab_speed, tab_kinds = st.tabs(["Cache growth", "Cached vs uncached", "MHA / GQA / MQA"])

with tab_grow:
    c1, c2 = st.columns([2, 1])
    n_new = c1.slider("New tokens", 1, 128, 32, key="kv_new_tokens")
    chat = c2.toggle("Chat template", value=True, key="kv_chat", help="Wrap the prompt as a user message.")
    bar = st.progress(0.0, text="Generating…")

    def report(step) -> None:
        bar.progress((step.index + 1) / n_new, text=f"token {step.index + 1} of at most {n_new}")

    try:
        result = resources.get_generation(source, prompt, bos, int(n_new), True, chat, on_step=report)
    except ValueError as error:
        bar.empty()
        st.warning(str(error))
        st.stop()
    bar.empty()
    st.markdown(f"**Generated:** {loaded.tokenizer.decode(list(result.new_ids), skip_special=True)!s}")
    positions = np.array([s.position for s in result.steps])
    measured = np.array([s.cache_bytes for s in result.steps], dtype=float)
    formula = np.array([kv_cache_bytes(config, int(p), 1, element) for p in positions])
    st.plotly_chart(charts.lines(positions, {"measured from the cache tensors": measured, "formula": formula},
                                 title="KV cache bytes while generating", x_title="tokens in the cache",
                                 y_title="bytes", mode="lines+markers"), key="kv_growth")
    per_layer = np.array(result.steps[-1].cache_bytes_per_layer)
    st.markdown(
        f"After {positions[-1]} tokens the cache holds **{measured[-1] / 2**20:.2f} MiB** "
        f"({per_layer[0] / 1024:.1f} KiB in each of {config.n_layers} layers); the formula gives "
        f"{formula[-1] / 2**20:.2f} MiB — largest difference over all steps: **{np.abs(measured - formula).max():.0f} bytes**. "
        f"That is 2 × {config.n_layers} × {config.n_kv_heads} × {config.head_dim} × {element} = "
        f"{2 * config.n_layers * config.n_kv_heads * config.head_dim * element:,} bytes per token.")
    st.caption(f"Preallocated for prompt + new tokens: {result.cache_capacity_bytes / 2**20:.2f} MiB. "
               f"Stopped: {result.stop_reason}.")

with tab_speed:
    st.markdown("Time per generated token, with the cache and recomputing the whole sequence every step.")
    n_speed = st.slider("Tokens to generate", 8, 128, 48, key="kv_speed_tokens")
    if st.button("Measure", key="kv_measure"):
        runs = {}
        for use_cache in (True, False):
            runs["with KV cache" if use_cache else "recompute everything"] = resources.get_generation(
                source, prompt, bos, int(n_speed), use_cache, False)
        st.session_state["kv_speed_runs"] = runs
    runs = st.session_state.get("kv_speed_runs")
    if runs:
        series = {name: np.array([s.seconds * 1000 for s in run.steps[1:]]) for name, run in runs.items()}
        x = [s.position for s in next(iter(runs.values())).steps[1:]]
        st.plotly_chart(charts.lines(x, series, title="Milliseconds per new token (after the prefill)",
                                     x_title="sequence length", y_title="ms", mode="lines+markers"), key="kv_speed")
        means = {name: float(v.mean()) for name, v in series.items()}
        st.caption(" · ".join(f"{name}: {ms:.1f} ms/token" for name, ms in means.items()))
