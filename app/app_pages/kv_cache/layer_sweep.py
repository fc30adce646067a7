"""Which layers can share KV heads (part of the sharing tab): merge one layer at a time, measure the
damage, then merge the cheapest first. Says how long before it runs; a click stops it."""

from __future__ import annotations

import numpy as np
import streamlit as st

from app import cache
from app.figures import charts
from app.figures.sharing_tables import cheapest_and_dearest, sharing_path
from app.ui import state
from app.ui.widgets import plain
from txviz.analysis.kv.sharing import layer_sharing_steps, sweep_seconds

SWEEP = state.StoppableRun("layers", "Ends the sweep; nothing partial is kept.")  # its mark: {"done": steps}


def draw(source, config, options: dict, text_name: str, text_tokens: int, used_tokens: int) -> None:
    """``text_tokens`` as chosen (it names the text's cut); ``used_tokens`` how many it has (fewer past its end)."""
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
    state.follow("layers_kv", source, {"layers_kv": fewer[0]})
    target = s1.segmented_control("Merge to", fewer, key="layers_kv",
                                  format_func=lambda n: f"{n} KV head{'s' if n > 1 else ''}")
    target = int(target if target in fewer else fewer[0])
    sweep = cache.layer_sharing_result(source, target, text_name, text_tokens)
    if sweep is None:
        sweep = run(s2, source, config, target, text_name, text_tokens, used_tokens)
    if sweep is not None:
        show(sweep, config, target)


def run(slot, source, config, target: int, text_name: str, text_tokens: int, used_tokens: int):
    """The sweep on request, after saying how long it will take; a Stop button (any click) ends it."""
    steps = layer_sharing_steps(config)
    stopped = SWEEP.stopped()
    if stopped is not None:  # a click ended the last run early
        st.info(f"Stopped after {stopped['done']} of {steps} steps; nothing was kept. Start it again to measure.")
    try:
        first, last = cache.layer_sharing_step_seconds(source, target, text_name, text_tokens)
    except ValueError as error:
        st.warning(plain(error))
        return None
    estimate = sweep_seconds(config, first, last)
    slot.caption(f"About **{estimate:.0f} s** here, {steps} steps over {used_tokens} tokens: a step runs the layers "
                 f"from the one it merges on (measured {first:.2f} s merging the first layer, {last:.2f} s the last).")
    if not slot.button(f"Measure all {config.n_layers} layers (≈ {estimate:.0f} s)", key="layers_run"):
        return None
    try:
        with SWEEP.bar("Merging one layer at a time…", {"done": 0}, slot=slot) as update:
            def progress(done: int, total: int) -> None:
                left = max(estimate * (1 - done / total), 0.0)
                update(done / total, f"step {done} of {total}, about {left:.0f} s left", {"done": done})

            return cache.get_layer_sharing(source, target, text_name, text_tokens, progress=progress)
    except ValueError as error:
        st.warning(plain(error))
        return None


def show(sweep, config, target: int) -> None:
    st.plotly_chart(charts.bars([str(i) for i in range(config.n_layers)], np.array(sweep.layer_kl), log_y=True,
                                y_title="nats", title=f"KL(original ‖ merged) with only that layer's KV heads merged to {target}"),
                    key="layers_kl")
    cheap, dear = cheapest_and_dearest(sweep)
    st.markdown(
        f"Cheapest layers to merge: **{', '.join(map(str, cheap))}** (KL "
        f"{', '.join(f'{sweep.layer_kl[i]:.3f}' for i in cheap)}); dearest: **{', '.join(map(str, dear))}** "
        f"(KL {', '.join(f'{sweep.layer_kl[i]:.3f}' for i in dear)}, top-1 agreement "
        f"{', '.join(f'{sweep.layer_top1[i] * 100:.0f}%' for i in dear)}).")
    kib = np.array(sweep.path_kv_bytes_per_token) / 1024
    st.plotly_chart(charts.lines(kib, {"perplexity": np.array(sweep.path_perplexity)}, mode="lines+markers",
                                 log_y=True, x_title="KV KiB per token", y_title="perplexity",
                                 title="Merging the cheapest layers first: memory against quality"), key="layers_path")
    st.dataframe(sharing_path(sweep), hide_index=True)
    st.caption("Bytes are those of a design that stores the merged layers' shared heads once "
               f"({target} per layer) and the others' {config.n_kv_heads}; the model measured here "
               "keeps its shapes and computes exactly what such a design would.")
