"""The cached vs uncached tab: time per generated token with the KV cache and recomputing
the whole sequence every step. Runs on a click, says beforehand how long, and stops on a click."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.figures import charts
from app.services.prompts import PromptError
from app.ui import state
from app.ui.widgets import bounded_slider, plain
from txviz import limits
from txviz.analysis.kv.speed import both_runs_seconds, ms_per_token

DEFAULTS = {"kv_speed_tokens": 48}  # kept across tab visits by state.keep on the page

RUNS = (("with KV cache", True), ("recompute everything", False))
MEASURED = "_kv_speed_measured"  # the last timing, with what it was made on
TIMING = state.StoppableRun("kv_measure", "Ends the timing; nothing partial is kept.")


def draw(source, loaded) -> None:
    prompt, bos, most_new = state.get("prompt"), state.get("bos"), cache.limits().max_new_tokens
    st.markdown("Time per generated token, with the cache and recomputing the whole sequence every step.")
    state.within("kv_speed_tokens", min(8, most_new), min(128, most_new))
    n_speed = bounded_slider(st, "Tokens to generate", min(8, most_new), min(128, most_new), key="kv_speed_tokens")
    st.caption("Both runs generate exactly this many tokens from the prompt as typed (no chat template), "
               "ignoring end-of-text, so that they time the same steps. They run when you press Measure"
               + rough_time(source, loaded, prompt, bos, int(n_speed)) + "; a click on Stop ends them.")
    made_on = (source, prompt, bos, int(n_speed))  # a measurement is shown only beside what it was made on
    stopped = TIMING.stopped()
    if stopped is not None:  # a click ended the last timing: say so, or the page looks as if nothing ran
        st.info(f"Stopped during “{stopped['run']}”, at token {stopped['token']} of {stopped['of']}; nothing "
                "partial was kept. Press Measure to time both runs again.")
    if st.button("Measure", key="kv_measure"):
        measure(source, prompt, bos, int(n_speed), made_on)
    kept = state.get(MEASURED, None)
    if kept and kept["made_on"] != made_on:
        st.caption(f"The last measurement was for {other_settings(kept['made_on'], made_on)}: "
                   "press Measure to time the present ones.")
    elif kept:
        x, series = ms_per_token(kept["runs"])
        st.plotly_chart(charts.lines(x, series, title="Milliseconds per new token (after the prefill)",
                                     x_title="sequence length", y_title="ms", mode="lines+markers"), key="kv_speed")
        st.caption(" · ".join(f"{name}: {float(v.mean()):.1f} ms/token" for name, v in series.items()))


def other_settings(kept: tuple, now: tuple) -> str:
    """What differs between the kept measurement's (model, prompt, BOS, tokens) and the current ones."""
    names = ("another model", "another prompt", "another BOS choice", f"{kept[3]} tokens to generate")
    return ", ".join(name for name, a, b in zip(names, kept, now) if a != b)


def measure(source, prompt: str, bos: str, n_speed: int, made_on: tuple) -> None:
    """Both runs, one after the other, into session state with what they were made on; a Stop button
    (any click) ends them."""
    with TIMING.bar("Timing…", {"run": RUNS[0][0], "token": 0, "of": n_speed}) as update:
        try:
            runs = {}
            for done, (name, use_cache) in enumerate(RUNS):
                def timing_step(step, done=done, name=name) -> None:
                    fraction = (done * n_speed + step.index + 1) / (2 * n_speed)
                    update(fraction, f"{name}: token {step.index + 1} of {n_speed}",
                           {"run": name, "token": step.index + 1, "of": n_speed})
                runs[name] = cache.get_generation(source, prompt, bos, n_speed, use_cache, False,
                                                  on_step=timing_step, stop_at_eos=False)
            state.put(MEASURED, {"made_on": made_on, "runs": runs})
        except ValueError as error:
            st.warning(plain(error))


def rough_time(source, loaded, prompt: str, bos: str, n_new: int) -> str:
    """', roughly N s here' from the FLOPs of both runs, or nothing for a prompt that cannot run."""
    try:
        n_prompt = len(cache.encode(source, prompt, bos).ids)
    except PromptError:
        return ""
    seconds = both_runs_seconds(loaded.config, n_prompt, n_new, element_bytes=loaded.dtype.itemsize,
                                gflops=cache.limits().gflops)
    return f" (roughly {limits.format_seconds(seconds)} here, from their FLOPs)"
