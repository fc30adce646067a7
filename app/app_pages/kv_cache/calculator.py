"""The memory calculator tab: a published preset or an uploaded config.json, the dtypes,
batch, GPU and prefill chunk, then what serving the model takes against the GPU. Needs no model."""

from __future__ import annotations

import streamlit as st

from app.app_pages.kv_cache.model_choice import PRESET, describe, model_choice
from app.figures import calculator_charts
from app.ui import state
from app.ui.config_notes import config_warnings, layer_table
from app.ui.widgets import byte_size, counted, plain
from txviz.analysis.kv import memory, memory_model, presets
from txviz.analysis.kv.fit import chosen_kind
from txviz.analysis.kv.report import MemoryReport, charted_lengths, memory_report
from txviz.limits import format_bytes

WHOLE = "whole prompt"
DEFAULTS = {"mem_source": PRESET, "mem_preset": presets.PRESETS["llama-3-8b"]["name"],
            "mem_weight_dtype": "bf16", "mem_kv_dtype": "bf16", "mem_batch": 1, "mem_gpu": 80.0, "mem_chunk": WHOLE}


def draw() -> None:
    st.markdown(
        "What serving a model takes: its **weights**, the **KV cache** of every sequence in the batch, and the "
        "**activations** of a forward pass, against your GPU. **MHA** gives every query head its own K and V; "
        "**GQA** lets a group of query heads share one; **MQA** shares one among all: the cache and the K and V "
        "projections change with the KV heads, the rest of the model stays.")
    chosen = model_choice()
    if chosen is None:
        return
    spec, identity = chosen
    st.caption(describe(spec))
    config_warnings(spec)
    settings, gpu_gib = serving_settings(spec, identity)
    if settings["weight_dtype"] == memory.PUBLISHED:
        st.info(plain(spec.weight_format.assumption))
    variants = attention_kinds(spec)
    state.follow("mem_kind", identity, {"mem_kind": chosen_kind(None, variants, spec.kind)})
    kind = chosen_kind(st.segmented_control("Attention kind", list(variants), key="mem_kind",
                                            help="Starts at the model's own kind whenever the model changes."),
                       variants, spec.kind)
    selected, lengths = variants[kind], charted_lengths(spec)
    what_if(spec, selected, kind)
    st.plotly_chart(calculator_charts.bill(selected, kind, lengths, settings, gpu_gib), key="mem_total")
    bill_numbers(selected, kind, settings, gpu_gib)
    st.plotly_chart(calculator_charts.kv_by_kind(variants, lengths, settings["batch"], settings["kv_dtype"]),
                    key="mem_context")
    a, b = st.columns(2)
    a.plotly_chart(calculator_charts.weights_by_dtype(selected), key="mem_weights")
    b.plotly_chart(calculator_charts.memory_by_batch(selected, kind, lengths, settings["kv_dtype"],
                                                     settings["weight_dtype"]), key="mem_batch_chart")


def follow_weight_format(spec: memory_model.MemoryModel, identity: str) -> tuple[str, ...]:
    """The weight formats offered for ``spec``. A model published quantized opens at its published format;
    another keeps the dtype chosen before, unless that was the previous model's published one."""
    offered, own = memory.weight_dtypes(spec), spec.weight_format is not None
    if own or state.get("mem_weight_dtype", None) not in offered:
        state.follow("mem_weight_dtype", identity, {"mem_weight_dtype": offered[0] if own else "bf16"})
    return offered


def serving_settings(spec: memory_model.MemoryModel, identity: str) -> tuple[dict, float]:
    """(the memory functions' settings, the GPU's GiB) from one row of widgets."""
    c1, c2, c3, c4, c5 = st.columns(5)
    weight_dtype = c1.selectbox("Weights dtype", follow_weight_format(spec, identity), key="mem_weight_dtype",
                                help="'as published': the config's quantization_config, tensor group by group.")
    kv_dtype = c2.selectbox("KV dtype", memory.KV_DTYPES, key="mem_kv_dtype")
    batch = int(c3.number_input("Batch", 1, 1024, key="mem_batch"))
    gpu_gib = float(c4.number_input("GPU memory (GiB)", 1.0, 2048.0, key="mem_gpu"))
    chunk = c5.selectbox("Prefill chunk", [WHOLE, 512, 1024, 2048, 4096, 8192], key="mem_chunk",
                         help="Servers such as vLLM prefill long prompts in chunks: activations stop growing there.")
    return dict(batch=batch, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                prefill_chunk=None if chunk == WHOLE else int(chunk)), gpu_gib


def attention_kinds(spec: memory_model.MemoryModel) -> dict[str, memory_model.MemoryModel]:
    try:
        return memory_model.kind_variants(spec)
    except ValueError as error:  # MLA caches a latent: compare it with the other presets instead
        st.info(plain(error))
        return {spec.kind: spec}


def kv_rates(column, report: MemoryReport, kind: str) -> None:
    """KV bytes a token adds while the windows fill, and past them (only the global layers still grow)."""
    selected = report.model
    column.metric(f"KV bytes per token ({kind})", byte_size(report.kv_bytes_per_token))
    if selected.n_window_layers:
        growing = sum(group.layers for group in selected.layer_groups if group.grows)
        widest = max(group.window for group in selected.layer_groups if group.caches_kv and group.window)
        column.metric(f"Past {widest:,} tokens, per token",
                      byte_size(report.kv_bytes_per_token_past_windows),
                      help=f"Once every window is full, only the {counted(growing, 'layer')} of {selected.n_layers} "
                           "without one keep growing.")
    state_bytes = memory.state_bytes(selected, 1, report.kv_dtype)
    if state_bytes:
        column.metric("Fixed state per sequence", format_bytes(state_bytes),
                      help="Linear-attention and state-space layers keep no K and V but a state of this size per "
                           "sequence, whatever the context.")


def what_if(spec: memory_model.MemoryModel, selected: memory_model.MemoryModel, kind: str) -> None:
    """Say what another attention kind changes besides the cache: the K/V projections' parameters."""
    extra = selected.n_params - spec.n_params
    if extra:
        st.caption(f"As {kind} ({counted(selected.kv_heads, 'KV head')}) the model has {selected.n_params / 1e9:,.2f} B "
                   f"parameters: {extra / 1e9:+,.2f} B in the K and V projections, which the weights, FLOPs and "
                   "the fit below include.")


def bill_numbers(selected: memory_model.MemoryModel, kind: str, settings: dict, gpu_gib: float) -> None:
    """The calculator's numbers, from the memory report ``txviz memory`` prints for the same input."""
    report = memory_report(selected, gpu_gib=gpu_gib, **settings)
    a, b, c = st.columns(3)
    kv_rates(a, report, kind)
    summary = report.fit
    longest, at, total = summary.longest, summary.at, summary.bill
    b.metric("Longest context that fits (all three)",
             "not limited" if longest is None else "none" if longest == 0 else f"{longest:,} tokens")
    if longest == 0:
        st.warning(f"The weights alone ({total.weights / memory.GIB:,.1f} GiB in {settings['weight_dtype']}) "
                   f"{'leave no room for one token' if summary.weights_fit else 'do not fit'} "
                   f"in {gpu_gib:g} GiB: a smaller weight dtype, a bigger GPU, or several GPUs.")
    c.metric(f"Total at {at:,} tokens", f"{total.total / memory.GIB:,.2f} GiB",
             delta=f"{summary.free_gib:+,.2f} GiB free", delta_color="normal")
    layer_table(selected, at, settings["batch"], settings["kv_dtype"])
    flops = report.flops_per_token
    st.caption(f"A token at position {at:,} takes {flops / 1e9:,.2f} GFLOPs (2 per weight it multiplies, plus "
               f"attention over the positions each layer keeps). "
               f"At {at:,} tokens: weights {total.weights / memory.GIB:,.2f} GiB + KV cache "
               f"{total.kv_cache / memory.GIB:,.2f} GiB + activations {total.activations / memory.GIB:,.2f} GiB. "
               + (f"The model was built for {selected.max_context:,} tokens. " if selected.max_context else "")
               + memory.ACTIVATION_ASSUMPTIONS)
