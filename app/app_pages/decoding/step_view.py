"""One step of the run, chosen with the scrubber: what the sampler chose between and what it drew, the new
token's attention, the cache's bytes against the formula and the step's time; then the branches from it.
A fragment: scrubbing or choosing a layer or head reruns this part alone, reading the run's record (the
model does not run again)."""

from __future__ import annotations

import streamlit as st

from app.app_pages.decoding import attention, branches, scrubber
from app.figures import decoding_charts
from app.services import decoding
from app.ui import state
from app.ui.widgets import plain

KEPT_TIMINGS = 64  # steps timed without the cache that a session keeps


@st.fragment
def draw(view) -> None:
    index = scrubber.chosen_step(view)
    step = view.run.steps[index]
    st.subheader(f"Step {index}: the token at position {step.position}")
    _, right = st.columns(2, gap="medium")
    with right:
        layer, head = attention.choose(view)
    row, heads = attention.figures(view, step, layer, head)
    formula = decoding.kv_formula_per_layer(view.config, step.position, view.loaded.dtype.itemsize)
    kv = decoding_charts.kv_bytes.parts(list(step.kv_bytes_per_layer), formula,
                                        title=f"KV cache per layer: the {step.position} tokens before this one")
    # one figure for the step: a scrub sends and redraws one chart
    figure = decoding_charts.step_figure([[(sampler_parts(view, step), 240, 110), (kv, 170, 70)],
                                          [(row, 220, 60), (heads, 22 * view.config.n_heads + 20, 10)]])
    st.plotly_chart(figure, key="dec_step_chart", config={"displayModeBar": False})
    left, right = st.columns(2, gap="medium")
    with left:
        sampler_text(view, step)
    with right:
        attention.caption(view, step, layer, head)
    cache_and_time(view, index, formula)
    branches.draw(view, index)


def sampler_parts(view, step) -> tuple[list, dict]:
    """The candidates' raw, tempered and sampled probabilities, the cut and the drawn token: the chart's
    (data, layout)."""
    sampling = view.run.sampling
    candidates = step.candidates
    chosen = next((i for i, c in enumerate(candidates) if c.id == step.token.id), None)
    how = "greedy" if sampling.greedy else (
        f"temperature {sampling.temperature:g}" + (f", top-k {sampling.top_k}" if sampling.top_k else "")
        + (f", top-p {sampling.top_p:g}" if sampling.top_p else "") + f", seed {sampling.seed}")
    return decoding_charts.sampler_bars.parts(
        [c.text or f"#{c.id}" for c in candidates], [c.prob for c in candidates], [c.prob_tempered for c in candidates],
        [c.prob_sampled for c in candidates], chosen, show_tempered=not sampling.greedy,
        title=f"Top {len(candidates)} next tokens ({how})")


def sampler_text(view, step) -> None:
    """The drawn token with its rank and probability; how many tokens the sampler kept."""
    token = step.token
    drawn = "chosen by the branch" if step.forced else "drawn"
    st.markdown(f"**{drawn}:** `{scrubber.token_label(token.text or f'#{token.id}')}` — rank **{token.rank}**, "
                f"probability **{token.prob:.3f}** raw, **{token.prob_sampled:.3f}** in the distribution it was drawn "
                f"from. The sampler kept **{step.kept:,}** of {view.config.vocab_size:,} tokens"
                + ("" if step.kept >= len(step.candidates) else " (the dashed line: the cut)") + ".")


def cache_and_time(view, index: int, formula: list[int]) -> None:
    """The cache's bytes after the step, measured and by the formula (the chart is in the step's figure);
    the step's time, and on demand the same step without the cache."""
    step, config = view.run.steps[index], view.config
    element = view.loaded.dtype.itemsize
    difference = max(abs(m - f) for m, f in zip(step.kv_bytes_per_layer, formula))
    windowed = [w for w in config.layer_windows if w is not None]
    st.markdown(f"**KV cache: {sum(step.kv_bytes_per_layer) / 2**20:.2f} MiB** in all; the formula 2 × H_kv × d_head "
                f"× tokens × {element} B per layer gives {sum(formula) / 2**20:.2f} MiB (largest difference "
                f"{difference:,} B)." + (f" Sliding layers keep at most {min(windowed)} tokens." if windowed else ""))
    line, button = st.empty(), st.empty()
    uncached = state.get("_decoding_uncached", {}).get((view.inputs, view.run.new_ids, index))
    if uncached is None and index > 0 and button.button("Time it without the cache", key="dec_uncached",
                                                        help="Runs every token before this one again, once."):
        uncached = _time_without_cache(view, index)
        button.empty()
    what = "the whole prompt, once" if index == 0 else "one token against the cache"
    line.markdown(f"This step ran {what}: **{step.seconds * 1000:.0f} ms**"
                  + ("" if uncached is None else f"; without the cache (all {step.position} tokens again) "
                     f"**{uncached * 1000:.0f} ms**") + ".")
    if step.forced:
        st.caption(plain("A branch's own step: its distribution is the run's, read from the same cache."))


def _time_without_cache(view, index: int) -> float:
    seconds = decoding.seconds_without_cache(view.loaded, view.run, index)
    timings = dict(list(state.get("_decoding_uncached", {}).items())[-KEPT_TIMINGS + 1:])
    timings[(view.inputs, view.run.new_ids, index)] = seconds
    state.put("_decoding_uncached", timings)
    return seconds
