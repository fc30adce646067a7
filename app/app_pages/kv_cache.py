"""KV cache and memory page (seed §4.1, §5.2): what serving a model costs (weights + KV cache +
activations against a GPU), the real cache filling up during generation, cached against uncached
decoding, and MHA / GQA / MQA tried on the loaded model. Only the open tab runs: the ones that run the
model compute when opened, and the long sweep says how long it will take and can be stopped."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import kv_resources, resources
from app.figures import charts, memory_charts
from app.ui import sidebar, state
from app.ui.widgets import bounded_slider
from txviz import limits as limits_
from txviz.analysis import memory
from txviz.analysis.kv_sharing import describe_regrouping, kv_head_options, layer_sharing_steps
from txviz.loading.errors import ModelLoadError
from txviz.model.kv_cache import kv_cache_bytes

TABS = ("Memory calculator", "Cache growth", "Cached vs uncached", "Sharing KV heads")
PRESET, UPLOAD = "Preset", "Your config.json"
WHOLE = "whole prompt"
PRESET_BY_NAME = {fields["name"]: key for key, fields in memory.PRESETS.items()}  # the box shows names
CALCULATOR_DEFAULTS = {"mem_source": PRESET, "mem_preset": memory.PRESETS["llama-3-8b"]["name"],
                       "mem_weight_dtype": "bf16", "mem_kv_dtype": "bf16", "mem_batch": 1, "mem_gpu": 80.0,
                       "mem_chunk": WHOLE}


def follow(key: str, identity: str, default) -> None:
    """A widget whose options or default come from another input (the model) starts again from
    ``default`` when that input changes (STYLE 11); call before drawing it, and draw it without a default."""
    owner = f"_{key}_follows"
    if st.session_state.get(owner) != identity or st.session_state.get(key) is None:
        st.session_state[key] = default
        st.session_state[owner] = identity


def keep_alive(defaults: dict) -> None:
    """Fill the calculator's settings once and keep them while another tab is open (Streamlit forgets
    the value of a widget that a run does not draw)."""
    for key, default in defaults.items():
        st.session_state[key] = st.session_state.get(key, default)


st.title("KV cache & memory")
st.markdown(
    "A decoder generates one token at a time, and the keys and values of earlier tokens never change. "
    "So they are kept — the **KV cache** — and each new token only computes its own q, k, v and attends "
    "to the cache: O(n) work per step instead of recomputing all n tokens. The price is memory that "
    "grows with every token, in every layer, for every KV head. Sharing KV heads between query heads "
    "(GQA, or one for all: MQA) divides it.")
st.latex(r"\text{KV bytes} = 2 \times L \times H_{kv} \times d_{head} \times T \times B \times \text{bytes per element}")

keep_alive({**CALCULATOR_DEFAULTS, **{k: st.session_state[k] for k in ("mem_kind", "live_kv", "layers_kv")
                                      if k in st.session_state}})
st.caption("Only the open tab is computed: *Cache growth* and *Sharing KV heads* run the loaded model when opened.")
tabs = dict(zip(TABS, st.tabs(list(TABS), key="kv_tab", on_change="rerun")))
if not tabs["Memory calculator"].open:  # the calculator needs no model: it works even when none loads
    source, loaded = sidebar.current()
    config = loaded.config


# ---- the calculator --------------------------------------------------------------------------------
def calculator_model() -> tuple[memory.MemoryModel, str] | None:
    """The model the calculator describes and an identity that changes whenever it does; None while
    the upload is chosen but no readable file is there."""
    max_config = resources.limits().max_config_bytes
    source_kind = st.radio("Model from", (PRESET, UPLOAD), key="mem_source", horizontal=True)
    if source_kind == PRESET:
        chosen = PRESET_BY_NAME[st.selectbox("Preset", list(PRESET_BY_NAME), key="mem_preset")]
        return memory.preset(chosen), f"preset:{chosen}"
    upload = st.file_uploader("A Hugging Face config.json", type=["json"], key="mem_upload",
                              max_upload_size=max(1, -(-max_config // 2**20)),
                              help=f"Llama, Mistral, Qwen2, Mixtral and GPT-2 families; at most {max_config:,} bytes.")
    if upload is None:
        st.info("Upload a model's config.json to size it; switch back to *Preset* for the published models.")
        return None
    try:
        return memory.MemoryModel.from_config_json(upload.getvalue(), upload.name), f"upload:{upload.file_id}"
    except (ModelLoadError, ValueError) as error:
        st.error(f"Could not read that config.json: {error}")
        return None


def bill_chart(selected: memory.MemoryModel, kind: str, lengths: list[int], settings: dict, gpu_gib: float) -> None:
    bill = memory.bill_vs_context(selected, lengths, **settings)
    parts = {"weights": bill["weights"], "KV cache": bill["kv_cache"], "activations": bill["activations"]}
    st.plotly_chart(memory_charts.memory_bill(
        lengths, {name: np.array(v) / memory.GIB for name, v in parts.items()}, gpu_gib=gpu_gib,
        title=f"Weights ({settings['weight_dtype']}) + KV cache ({settings['kv_dtype']}) + activations, "
              f"batch {settings['batch']} ({kind})"), key="mem_total")
    a, b, c = st.columns(3)
    a.metric(f"KV bytes per token ({kind})", f"{memory.kv_bytes_per_token(selected, settings['kv_dtype']) / 1024:,.1f} KiB")
    longest = memory.longest_context(selected, gpu_gib, **settings)
    b.metric("Longest context that fits (all three)",
             "not limited" if longest is None else "none" if longest == 0 else f"{longest:,} tokens")
    at = min(n for n in (longest or None, selected.max_context, lengths[-1]) if n is not None)  # what fits, else the model's
    total = memory.memory_bill(selected, at, **settings)
    if longest == 0:
        st.warning(f"The weights alone ({total.weights / memory.GIB:,.1f} GiB in {settings['weight_dtype']}) "
                   f"{'do not fit' if total.weights > gpu_gib * memory.GIB else 'leave no room for one token'} "
                   f"in {gpu_gib:g} GiB: a smaller weight dtype, a bigger GPU, or several GPUs.")
    c.metric(f"Total at {at:,} tokens", f"{total.total / memory.GIB:,.2f} GiB",
             delta=f"{(gpu_gib * memory.GIB - total.total) / memory.GIB:+,.2f} GiB free", delta_color="normal")
    st.caption(f"At {at:,} tokens: weights {total.weights / memory.GIB:,.2f} GiB + KV cache "
               f"{total.kv_cache / memory.GIB:,.2f} GiB + activations {total.activations / memory.GIB:,.2f} GiB. "
               + (f"The model was built for {selected.max_context:,} tokens. " if selected.max_context else "")
               + memory.ACTIVATION_ASSUMPTIONS)


def calculator() -> None:
    st.markdown(
        "What serving a model takes: its **weights**, the **KV cache** of every sequence in the batch, and the "
        "**activations** of a forward pass, against your GPU. **MHA** gives every query head its own K and V; "
        "**GQA** lets a group of query heads share one; **MQA** shares one among all: only the KV heads change.")
    chosen = calculator_model()
    if chosen is None:
        return
    model_spec, identity = chosen
    st.caption(f"**{model_spec.name}** — {model_spec.kind}: {model_spec.n_layers} layers, {model_spec.n_heads} query "
               f"heads, {model_spec.kv_heads} KV heads, head_dim {model_spec.head_dim}, d_model {model_spec.d_model}"
               + (f", sliding window {model_spec.sliding_window}" if model_spec.sliding_window else "")
               + (f". Source: {model_spec.source}" if model_spec.source else "."))
    c1, c2, c3, c4, c5 = st.columns(5)
    weight_dtype = c1.selectbox("Weights dtype", memory.WEIGHT_DTYPES, key="mem_weight_dtype")
    kv_dtype = c2.selectbox("KV dtype", memory.KV_DTYPES, key="mem_kv_dtype")
    batch = int(c3.number_input("Batch", 1, 1024, key="mem_batch"))
    gpu_gib = float(c4.number_input("GPU memory (GiB)", 1.0, 2048.0, key="mem_gpu"))
    chunk = c5.selectbox("Prefill chunk", [WHOLE, 512, 1024, 2048, 4096, 8192], key="mem_chunk",
                         help="Servers such as vLLM prefill long prompts in chunks: activations stop growing there.")
    try:
        variants = memory.kind_variants(model_spec)
    except ValueError as error:  # MLA caches a latent: compare it with the other presets instead
        st.info(str(error))
        variants = {model_spec.kind: model_spec}
    follow("mem_kind", identity, model_spec.kind if model_spec.kind in variants else next(iter(variants)))
    kind = st.segmented_control("Attention kind", list(variants), key="mem_kind",
                                help="Starts at the model's own kind whenever the model changes.")
    kind = kind if kind in variants else model_spec.kind if model_spec.kind in variants else next(iter(variants))
    selected = variants[kind]
    lengths = memory.context_lengths(int(model_spec.max_context or 131072))
    settings = dict(batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                    prefill_chunk=None if chunk == WHOLE else int(chunk))
    bill_chart(selected, kind, lengths, settings, gpu_gib)

    series = memory.kv_vs_context(variants, lengths, batch=batch, kv_dtype=kv_dtype)
    gib = {label: np.array(values) / memory.GIB for label, values in series["bytes"].items()}
    st.plotly_chart(charts.lines(lengths, gib, title=f"KV cache alone vs context, each kind (batch {batch}, {kv_dtype})",
                                 x_title="tokens", y_title="GiB", log_x=True, mode="lines+markers"), key="mem_context")
    a, b = st.columns(2)
    weights = {dtype: memory.weight_bytes(selected, dtype) / memory.GIB for dtype in memory.WEIGHT_DTYPES}
    a.plotly_chart(charts.bars(list(weights), np.array(list(weights.values())), title="Weights by dtype",
                               y_title="GiB"), key="mem_weights")
    batches = [1, 2, 4, 8, 16, 32, 64]
    by_batch = memory.kv_vs_batch(selected, batches, tokens=min(8192, lengths[-1]), kv_dtype=kv_dtype,
                                  weight_dtype=weight_dtype)
    b.plotly_chart(charts.lines(batches, {"KV cache": np.array(by_batch["kv_bytes"]) / memory.GIB,
                                          f"weights ({weight_dtype})": np.full(len(batches), by_batch["weight_bytes"] / memory.GIB)},
                                title=f"Memory vs batch at {by_batch['tokens']:,} tokens ({kind})", x_title="batch",
                                y_title="GiB", mode="lines+markers"), key="mem_batch_chart")


# ---- the real cache, growing -------------------------------------------------------------------------
def cache_growth() -> None:
    prompt, bos, element = state.get("prompt"), state.get("bos"), loaded.dtype.itemsize
    has_template = bool(loaded.tokenizer.chat_template)
    c1, c2 = st.columns([2, 1])
    n_new = bounded_slider(c1, "New tokens", 1, min(128, resources.limits().max_new_tokens), 32, key="kv_new_tokens")
    chat = c2.toggle("Chat template", value=has_template, key="kv_chat", disabled=not has_template,
                     help="Wrap the prompt as a user message." if has_template else "This model has no chat template.")
    bar = st.progress(0.0, text="Generating…")
    try:
        result = kv_resources.get_generation(
            source, prompt, bos, int(n_new), True, chat and has_template, shared=True,
            on_step=lambda step: bar.progress((step.index + 1) / n_new, text=f"token {step.index + 1} of at most {n_new}"))
    except ValueError as error:  # the prompt (empty, too long, over the budget): the other tabs still work
        bar.empty()
        st.warning(str(error))
        return
    bar.empty()
    st.markdown(f"**Generated:** {loaded.tokenizer.decode(list(result.new_ids), skip_special=True)!s}")
    positions = np.array([s.position for s in result.steps])
    measured = np.array([s.cache_bytes for s in result.steps], dtype=float)
    formula = np.array([kv_cache_bytes(config, int(p), 1, element) for p in positions])
    per_token_layer = 2 * config.n_kv_heads * config.head_dim * element
    held = np.array([s.cache_bytes_per_layer for s in result.steps]) // per_token_layer  # (steps, layers)
    capacity = int(result.cache_capacity_bytes // (per_token_layer * config.n_layers)) or int(positions[-1]) + 1
    st.plotly_chart(memory_charts.cache_growth(positions, held, measured, formula, prompt_len=int(positions[0]),
                                               capacity=capacity), key="kv_growth")
    per_layer = np.array(result.steps[-1].cache_bytes_per_layer)
    st.markdown(
        f"After {positions[-1]} tokens the cache holds **{measured[-1] / 2**20:.2f} MiB** "
        f"({per_layer[0] / 1024:.1f} KiB in each of {config.n_layers} layers); the formula gives "
        f"{formula[-1] / 2**20:.2f} MiB — largest difference over all steps: **{np.abs(measured - formula).max():.0f} bytes**. "
        f"That is 2 × {config.n_layers} × {config.n_kv_heads} × {config.head_dim} × {element} = "
        f"{2 * config.n_layers * config.n_kv_heads * config.head_dim * element:,} bytes per token.")
    st.caption(f"Press ▶ Play or drag the slider to replay the steps. Preallocated for prompt + new tokens: "
               f"{result.cache_capacity_bytes / 2**20:.2f} MiB (the grey slots). Stopped: {result.stop_reason}.")


def cached_vs_uncached() -> None:
    prompt, bos, most_new = state.get("prompt"), state.get("bos"), resources.limits().max_new_tokens
    st.markdown("Time per generated token, with the cache and recomputing the whole sequence every step.")
    n_speed = bounded_slider(st, "Tokens to generate", min(8, most_new), min(128, most_new), 48, key="kv_speed_tokens")
    st.caption("Both runs generate exactly this many tokens from the prompt as typed (no chat template), "
               "ignoring end-of-text, so that they time the same steps. They run when you press Measure"
               + rough_time(prompt, bos, int(n_speed)) + "; a click on Stop ends them.")
    if st.button("Measure", key="kv_measure"):
        st.button("Stop", key="kv_measure_stop", help="Ends the timing; nothing partial is kept.")
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
        st.caption(" · ".join(f"{name}: {float(v.mean()):.1f} ms/token" for name, v in series.items()))


def rough_time(prompt: str, bos: str, n_new: int) -> str:
    """', roughly N s here' from the FLOPs of both runs (txviz.limits), or nothing for a prompt that cannot run."""
    try:
        n_prompt = len(resources.encode(source, prompt, bos).ids)
    except resources.PromptError:
        return ""
    seconds = sum(limits_.generation_estimate(config, n_prompt, n_new, element_bytes=loaded.dtype.itemsize,
                                              use_cache=use_cache, gflops=resources.limits().gflops).seconds
                  for use_cache in (True, False))
    return f" (roughly {limits_.format_seconds(seconds)} here, from their FLOPs)"


# ---- the loaded model with more or fewer KV heads ----------------------------------------------------
def live_sharing() -> None:
    st.subheader(f"Live, on the loaded model ({resources.display_name(loaded)})")
    options = kv_head_options(config)
    follow("live_kv", source, config.n_kv_heads)
    n_kv = st.segmented_control("KV heads", list(options), key="live_kv",
                                format_func=lambda n: f"{n} ({'MHA' if n == config.n_heads else 'MQA' if n == 1 else 'GQA'})")
    n_kv = int(n_kv if n_kv in options else config.n_kv_heads)
    st.caption(describe_regrouping(config.n_kv_heads, n_kv))
    text_tokens = st.select_slider("Tokens of the shipped text", [128, 256, 512, 1000], value=256, key="live_tokens")
    text_name = next(iter(resources.shipped_texts()))
    try:
        report = kv_resources.get_kv_counterfactual(source, n_kv, text_name, int(text_tokens))
    except resources.PromptError as error:  # over the memory budget: say so
        st.warning(str(error))
        return
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
    layer_sweep(options, text_name, int(text_tokens))


def layer_sweep(options: dict, text_name: str, text_tokens: int) -> None:
    st.subheader("Which layers can share? One layer at a time")
    fewer = [n for n in options if n < config.n_kv_heads]
    if not fewer:
        st.caption("This model already has one KV head per layer: there is nothing left to share.")
        return
    st.markdown(
        "Sharing need not be all or nothing. Merge the KV heads of **one layer** (every query head of that "
        "layer reads the mean of its group's keys and values) and measure the damage on the same text; "
        "then merge the cheapest layers first and watch quality against the KV bytes a token would cost. "
        "Layers whose heads are nearly interchangeable are where a mixed design saves memory cheaply.")
    s1, s2 = st.columns([1, 2])
    follow("layers_kv", source, fewer[0])
    target = s1.segmented_control("Merge to", fewer, key="layers_kv",
                                  format_func=lambda n: f"{n} KV head{'s' if n > 1 else ''}")
    target = int(target if target in fewer else fewer[0])
    sweep = kv_resources.layer_sharing_result(source, target, text_name, text_tokens)
    if sweep is None:
        sweep = run_sweep(s2, target, text_name, text_tokens)
    if sweep is not None:
        show_sweep(sweep, target)


def run_sweep(slot, target: int, text_name: str, text_tokens: int):
    """The sweep on request, after saying how long it will take; a Stop button (any click) ends it."""
    steps = layer_sharing_steps(config)
    if st.session_state.pop("_layers_running", None) is not None:  # a click ended the last run early
        done = st.session_state.pop("_layers_done", 0)
        st.info(f"Stopped after {done} of {steps} steps; nothing was kept. Start it again to measure.")
    try:
        step = kv_resources.layer_sharing_step_seconds(source, target, text_name, text_tokens)
    except ValueError as error:
        st.warning(str(error))
        return None
    estimate = step * steps
    slot.caption(f"About **{estimate:.0f} s** here: one step (merge one layer, one pass over {text_tokens} tokens) "
                 f"measured {step:.2f} s, × {steps} steps.")
    if not slot.button(f"Measure all {config.n_layers} layers (≈ {estimate:.0f} s)", key="layers_run"):
        return None
    slot.button("Stop", key="layers_stop", help="Ends the sweep; nothing partial is kept.")
    bar = st.progress(0.0, text="Merging one layer at a time…")
    st.session_state["_layers_running"] = True

    def progress(done: int, total: int) -> None:
        st.session_state["_layers_done"] = done
        left = max(estimate * (1 - done / total), 0.0)
        bar.progress(done / total, text=f"step {done} of {total}, about {left:.0f} s left")

    try:
        sweep = kv_resources.get_layer_sharing(source, target, text_name, text_tokens, progress=progress)
    except ValueError as error:
        st.warning(str(error))
        sweep = None
    st.session_state.pop("_layers_running", None)
    bar.empty()
    return sweep


def show_sweep(sweep, target: int) -> None:
    st.plotly_chart(charts.bars([str(i) for i in range(config.n_layers)], np.array(sweep.layer_kl), log_y=True,
                                y_title="nats", title=f"KL(original ‖ merged) with only that layer's KV heads merged to {target}"),
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
                                 title="Merging the cheapest layers first: memory against quality"), key="layers_path")
    st.dataframe({"layers merged": sweep.path_layers, "KV bytes / token": sweep.path_kv_bytes_per_token,
                  "perplexity": [round(p, 2) for p in sweep.path_perplexity],
                  "mean KL (nats)": [round(k, 4) for k in sweep.path_kl],
                  "top-1 agreement": [f"{a * 100:.1f}%" for a in sweep.path_top1]}, hide_index=True)
    st.caption("Bytes are those of a design that stores the merged layers' shared heads once "
               f"({target} per layer) and the others' {config.n_kv_heads}; the model measured here "
               "keeps its shapes and computes exactly what such a design would.")


for name, draw in zip(TABS, (calculator, cache_growth, cached_vs_uncached, live_sharing)):
    with tabs[name]:
        if tabs[name].open is not False:  # None: state tracking off (never here); computed only when open
            draw()
