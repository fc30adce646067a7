"""KV cache and memory page (seed §4.1, §5.2): watch the real cache grow during generation, compare
cached and uncached decoding, and weigh MHA / GQA / MQA."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import charts, kv_resources, resources, sidebar, state
from app.widgets import bounded_slider
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
most_new = resources.limits().max_new_tokens
has_template = bool(loaded.tokenizer.chat_template)

tab_grow, tab_speed, tab_kinds = st.tabs(["Cache growth", "Cached vs uncached", "MHA / GQA / MQA"])

with tab_grow:
    c1, c2 = st.columns([2, 1])
    n_new = bounded_slider(c1, "New tokens", 1, min(128, most_new), 32, key="kv_new_tokens")
    chat = c2.toggle("Chat template", value=has_template, key="kv_chat", disabled=not has_template,
                     help="Wrap the prompt as a user message." if has_template else "This model has no chat template.")
    bar = st.progress(0.0, text="Generating…")

    def report(step) -> None:
        bar.progress((step.index + 1) / n_new, text=f"token {step.index + 1} of at most {n_new}")

    try:
        result = kv_resources.get_generation(source, prompt, bos, int(n_new), True, chat and has_template,
                                          on_step=report)
    except ValueError as error:  # the prompt (empty, too long, over the budget): the other tabs still work
        result = None
        st.warning(str(error))
    bar.empty()
    if result is not None:
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
    n_speed = bounded_slider(st, "Tokens to generate", min(8, most_new), min(128, most_new), 48, key="kv_speed_tokens")
    st.caption("Both runs generate exactly this many tokens from the prompt as typed (no chat template), "
               "ignoring end-of-text, so that they time the same steps.")
    if st.button("Measure", key="kv_measure"):
        speed_bar = st.progress(0.0, text="Timing…")
        try:
            runs = {}
            for done, (name, use_cache) in enumerate((("with KV cache", True), ("recompute everything", False))):
                def timing_step(step, done=done, name=name) -> None:
                    fraction = (done * n_speed + step.index + 1) / (2 * n_speed)
                    speed_bar.progress(min(fraction, 1.0), text=f"{name}: token {step.index + 1} of {n_speed}")
                runs[name] = kv_resources.get_generation(source, prompt, bos, int(n_speed), use_cache, False,
                                                      on_step=timing_step, stop_at_eos=False)
            st.session_state["kv_speed_runs"] = runs
        except ValueError as error:
            st.warning(str(error))
        speed_bar.empty()
    runs = st.session_state.get("kv_speed_runs")
    if runs:
        series = {name: np.array([s.seconds * 1000 for s in run.steps[1:]]) for name, run in runs.items()}
        x = [s.position for s in next(iter(runs.values())).steps[1:]]
        st.plotly_chart(charts.lines(x, series, title="Milliseconds per new token (after the prefill)",
                                     x_title="sequence length", y_title="ms", mode="lines+markers"), key="kv_speed")
        means = {name: float(v.mean()) for name, v in series.items()}
        st.caption(" · ".join(f"{name}: {ms:.1f} ms/token" for name, ms in means.items()))

with tab_kinds:
    from txviz.analysis import memory
    from txviz.analysis.kv_sharing import describe_regrouping, kv_head_options
    from txviz.loading.errors import ModelLoadError
    from txviz.loading.hf_config import read_hf_config

    st.markdown(
        "**MHA** gives every query head its own K and V; **GQA** lets a group of query heads share one K/V "
        "head; **MQA** shares one K/V head among all. Only the number of KV heads changes — and with it the "
        "cache. Below: first the calculator for well-known models (or your own config.json), then the same "
        "toggle applied for real to the loaded model.")
    names = {p["name"]: p["preset"] for p in memory.list_presets()}
    c1, c2, c3, c4 = st.columns(4)
    chosen = c1.selectbox("Model", list(names), index=list(names.values()).index("llama-3-8b"), key="mem_preset")
    kv_dtype = c2.selectbox("KV dtype", list(memory.KV_DTYPES), index=list(memory.KV_DTYPES).index("bf16"),
                            key="mem_kv_dtype")
    batch = c3.number_input("Batch", 1, 1024, 1, key="mem_batch")
    gpu_gib = c4.number_input("GPU memory (GiB)", 1.0, 2048.0, 80.0, key="mem_gpu")
    max_config = resources.limits().max_config_bytes
    upload = st.file_uploader("…or upload a Hugging Face config.json", type=["json"], key="mem_upload",
                              max_upload_size=max(1, -(-max_config // 2**20)),
                              help=f"Llama, Mistral, Qwen2, Mixtral and GPT-2 families; at most {max_config:,} bytes.")
    spec = memory.preset(names[chosen])
    if upload is not None:
        try:
            spec = memory.MemoryModel.from_config(read_hf_config(upload.getvalue()))
        except (ModelLoadError, ValueError) as error:
            st.error(f"Could not read that config.json: {error}")
    model_spec = memory.as_memory_model(spec)
    st.caption(f"**{model_spec.name}** — {model_spec.kind}: {model_spec.n_layers} layers, {model_spec.n_heads} query "
               f"heads, {model_spec.kv_heads} KV heads, head_dim {model_spec.head_dim}"
               + (f", sliding window {model_spec.sliding_window}" if model_spec.sliding_window else "")
               + (f". Source: {model_spec.source}" if model_spec.source else "."))
    max_tokens = int(model_spec.max_context or 131072)
    lengths = memory.context_lengths(max_tokens)
    try:
        variants = memory.kind_variants(model_spec)
    except ValueError as error:  # MLA caches a latent: compare it with the other presets instead
        st.info(str(error))
        variants = {model_spec.kind: model_spec}
    kind = st.segmented_control("Attention kind", list(variants), default=model_spec.kind
                                if model_spec.kind in variants else list(variants)[0], key="mem_kind")
    kind = kind or list(variants)[0]
    series = memory.kv_vs_context(variants, lengths, batch=int(batch), kv_dtype=kv_dtype)
    gib = {label: np.array(values) / memory.GIB for label, values in series["bytes"].items()}
    st.plotly_chart(charts.lines(lengths, gib, title=f"KV cache vs context (batch {batch}, {kv_dtype})",
                                 x_title="tokens", y_title="GiB", log_x=True, mode="lines+markers"), key="mem_context")
    selected = variants[kind]
    a, b = st.columns(2)
    per_token = memory.kv_bytes_per_token(selected, kv_dtype)
    fit = memory.max_context(selected, float(gpu_gib), batch=int(batch), kv_dtype=kv_dtype)
    a.metric(f"KV bytes per token ({kind})", f"{per_token / 1024:,.1f} KiB")
    a.metric("Longest context that fits", "not limited by KV" if fit.max_tokens is None else f"{fit.max_tokens:,} tokens")
    a.caption(fit.note)
    weights = {dtype: memory.weight_bytes(selected, dtype) / memory.GIB for dtype in memory.WEIGHT_DTYPES}
    b.plotly_chart(charts.bars(list(weights), np.array(list(weights.values())), title="Weights by dtype",
                               y_title="GiB"), key="mem_weights")
    batches = [1, 2, 4, 8, 16, 32, 64]
    by_batch = memory.kv_vs_batch(selected, batches, tokens=min(8192, max_tokens), kv_dtype=kv_dtype)
    st.plotly_chart(charts.lines(batches, {"KV cache": np.array(by_batch["kv_bytes"]) / memory.GIB,
                                           "weights (bf16)": np.full(len(batches), by_batch["weight_bytes"] / memory.GIB)},
                                 title=f"Memory vs batch at {by_batch['tokens']:,} tokens ({kind})", x_title="batch",
                                 y_title="GiB", mode="lines+markers"), key="mem_batch_chart")

    st.subheader(f"Live, on the loaded model ({resources.display_name(loaded)})")
    options = kv_head_options(config)
    n_kv = st.segmented_control("KV heads", list(options), default=config.n_kv_heads, key="live_kv",
                                format_func=lambda n: f"{n} ({'MHA' if n == config.n_heads else 'MQA' if n == 1 else 'GQA'})")
    n_kv = int(n_kv or config.n_kv_heads)
    st.caption(describe_regrouping(config.n_kv_heads, n_kv))
    texts = resources.shipped_texts()
    text_tokens = st.select_slider("Tokens of the shipped text", [128, 256, 512, 1000], value=256, key="live_tokens")
    try:
        report = kv_resources.get_kv_counterfactual(source, n_kv, next(iter(texts)), int(text_tokens))
    except resources.PromptError as error:  # over the memory budget: say so, keep the calculator above
        st.warning(str(error))
        st.stop()
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("KV cache (measured)", f"{report.kv_bytes_variant / 2**20:.2f} MiB",
              delta=f"{(report.kv_bytes_variant / report.kv_bytes_original - 1) * 100:+.0f}%", delta_color="inverse")
    m2.metric("Perplexity", f"{report.perplexity_variant:.2f}", delta=f"original {report.perplexity_original:.2f}",
              delta_color="off")
    m3.metric("Top-1 agreement", f"{report.top1_agreement * 100:.1f}%")
    m4.metric("Mean KL(original‖variant)", f"{report.mean_kl:.3g} nats")
    if n_kv < config.n_kv_heads:
        st.warning("Mean-pooling KV heads without further training (Ainslie et al. train 5% more after converting) "
                   "shows how much each head's own keys and values matter: the quality loss above is the real one.")

    st.subheader("Which layers can share? One layer at a time")
    fewer = [n for n in options if n < config.n_kv_heads]
    if not fewer:
        st.caption("This model already has one KV head per layer: there is nothing left to share.")
    else:
        st.markdown(
            "Sharing need not be all or nothing. Merge the KV heads of **one layer** (every query head of that "
            "layer reads the mean of its group's keys and values) and measure the damage on the same text; "
            "then merge the cheapest layers first and watch quality against the KV bytes a token would cost. "
            "Layers whose heads are nearly interchangeable are where a mixed design saves memory cheaply.")
        s1, s2 = st.columns([1, 2])
        target = s1.segmented_control("Merge to", fewer, default=fewer[0], key="layers_kv",
                                      format_func=lambda n: f"{n} KV head{'s' if n > 1 else ''}")
        target = int(target or fewer[0])
        text_name = next(iter(texts))
        sweep = kv_resources.layer_sharing_result(source, target, text_name, int(text_tokens))
        button_slot = s2.empty()
        if sweep is None and button_slot.button(f"Measure all {config.n_layers} layers ({config.n_layers + 8} "
                                                f"passes over {int(text_tokens)} tokens)", key="layers_run"):
            button_slot.empty()
            sweep_bar = st.progress(0.0, text="Merging one layer at a time…")
            try:
                sweep = kv_resources.get_layer_sharing(
                    source, target, text_name, int(text_tokens),
                    progress=lambda done, total: sweep_bar.progress(done / total, text=f"pass {done} of {total}"))
            except ValueError as error:
                st.warning(str(error))
            sweep_bar.empty()
        if sweep is not None:
            layer_names = [str(i) for i in range(config.n_layers)]
            st.plotly_chart(charts.bars(layer_names, np.array(sweep.layer_kl), log_y=True, y_title="nats",
                                        title=f"KL(original ‖ merged) with only that layer's KV heads merged to {target}"),
                            key="layers_kl")
            cheap, dear = sweep.order[:3], sweep.order[-3:][::-1]
            st.markdown(
                f"Cheapest layers to merge: **{', '.join(map(str, cheap))}** (KL "
                f"{', '.join(f'{sweep.layer_kl[i]:.3f}' for i in cheap)}); dearest: **{', '.join(map(str, dear))}** "
                f"(KL {', '.join(f'{sweep.layer_kl[i]:.3f}' for i in dear)}, top-1 agreement "
                f"{', '.join(f'{sweep.layer_top1[i] * 100:.0f}%' for i in dear)}).")
            kib = np.array(sweep.path_kv_bytes_per_token) / 1024
            st.plotly_chart(charts.lines(kib, {"perplexity": np.array(sweep.path_perplexity)}, mode="lines+markers",
                                         log_y=True, x_title="KV KiB per token", y_title="perplexity",
                                         title="Merging the cheapest layers first: memory against quality"),
                            key="layers_path")
            st.dataframe({"layers merged": sweep.path_layers, "KV bytes / token": sweep.path_kv_bytes_per_token,
                          "perplexity": [round(p, 2) for p in sweep.path_perplexity],
                          "mean KL (nats)": [round(k, 4) for k in sweep.path_kl],
                          "top-1 agreement": [f"{a * 100:.1f}%" for a in sweep.path_top1]}, hide_index=True)
            st.caption("Bytes are those of a design that stores the merged layers' shared heads once "
                       f"({target} per layer) and the others' {config.n_kv_heads}; the model measured here "
                       "keeps its shapes and computes exactly what such a design would.")
