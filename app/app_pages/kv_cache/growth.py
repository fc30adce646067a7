"""The cache growth tab: generate from the prompt and watch the real KV cache fill, layer
by layer, beside the formula's bytes."""

from __future__ import annotations

from itertools import groupby

import streamlit as st

from app import cache
from app.figures import memory_charts
from app.ui import state
from app.ui.widgets import bounded_slider, plain
from txviz.analysis.kv.growth import cache_growth

DEFAULTS = {"kv_new_tokens": 32}  # kept across tab visits by state.keep on the page


def draw(source, loaded) -> None:
    config, element = loaded.config, loaded.dtype.itemsize
    has_template = bool(loaded.tokenizer.chat_template)
    c1, c2 = st.columns([2, 1])
    most_new = min(128, cache.limits().max_new_tokens)
    state.within("kv_new_tokens", 1, most_new)
    n_new = bounded_slider(c1, "New tokens", 1, most_new, key="kv_new_tokens")
    chat = c2.toggle("Chat template", value=has_template, key="kv_chat", disabled=not has_template,
                     help="Wrap the prompt as a user message." if has_template else "This model has no chat template.")
    bar = st.progress(0.0, text="Generating…")
    try:
        result = cache.get_generation(
            source, state.get("prompt"), state.get("bos"), int(n_new), True, chat and has_template, shared=True,
            on_step=lambda step: bar.progress((step.index + 1) / n_new, text=f"token {step.index + 1} of at most {n_new}"))
    except ValueError as error:  # the prompt (empty, too long, over the budget): the other tabs still work
        bar.empty()
        st.warning(plain(error))
        return
    bar.empty()
    st.markdown(f"**Generated:** {plain(generated_text(loaded.tokenizer, list(result.new_ids)))}")
    grown = cache_growth(result.steps, result.cache_capacity_bytes, config, element)
    st.plotly_chart(memory_charts.cache_growth(grown.positions, grown.held, grown.measured, grown.formula,
                                               prompt_len=int(grown.positions[0]), capacity=grown.capacity),
                    key="kv_growth")
    st.markdown(
        f"After {grown.positions[-1]} tokens the cache holds **{grown.measured[-1] / 2**20:.2f} MiB** "
        f"({_per_layer_text(grown.last_per_layer, config)}); the formula gives "
        f"{grown.formula[-1] / 2**20:.2f} MiB — largest difference over all steps: **{grown.largest_difference:.0f} bytes**. "
        f"That is 2 × {config.n_layers} × {config.n_kv_heads} × {config.head_dim} × {element} = "
        f"{grown.bytes_per_token:,} bytes per token" + (
            f" while no window has filled; past {min(w for w in config.layer_windows if w)} tokens only the "
            f"{sum(w is None for w in config.layer_windows)} global layers grow." if any(config.layer_windows) else "."))
    st.caption(f"Press ▶ Play or drag the slider to replay the steps. Preallocated for prompt + new tokens: "
               f"{result.cache_capacity_bytes / 2**20:.2f} MiB (the grey slots). Stopped: {result.stop_reason}.")


def _per_layer_text(per_layer, config) -> str:
    """What each layer holds: one figure when all are equal, else the range (sliding-window layers)."""
    low, high = float(min(per_layer)) / 1024, float(max(per_layer)) / 1024
    if low == high:
        return f"{low:.1f} KiB in each of {config.n_layers} layers"
    return f"{low:.1f}–{high:.1f} KiB per layer over {config.n_layers} layers: a local layer keeps only its window"


def generated_text(tokenizer, ids: list[int]) -> str:
    """``ids`` decoded, an id past the tokenizer's vocabulary written by number: a model's embedding is often
    padded past its tokenizer's (Qwen3, OLMo 2, gpt-oss), and nothing stops it from choosing such a row."""
    parts = []
    for known, run in groupby(ids, key=lambda token_id: token_id < tokenizer.vocab_size):
        run = list(run)
        parts.append(tokenizer.decode(run, skip_special=True) if known
                     else "".join(f"<id {token_id}: no token>" for token_id in run))
    return "".join(parts)
