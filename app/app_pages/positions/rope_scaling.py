"""The "RoPE scaling" tab: how linear, NTK-aware, YaRN and Llama 3 scaling change the rotation
speeds, and the per-token loss of a shipped text under each. Scoring runs only on a click, with a
measured estimate; Stop ends it between scalings, and the scalings scored are kept for every session."""

from __future__ import annotations

import streamlit as st

from app import cache
from app.app_pages.positions.view import PositionsView
from app.figures import charts
from app.services.prompts import PromptError
from app.services.texts import shipped_text_ids, shipped_texts
from app.ui import state
from app.ui.widgets import plain
from txviz import limits as limits_
from txviz.analysis.positions import measured as pos

SCORING = state.StoppableRun("rope_scaling", "Ends the run after the scaling in progress; those scored are kept.")
# its mark: the run (source, text, factor, tokens)


def scaling_tab(view: PositionsView) -> None:
    st.markdown(
        "To stretch a model past its trained context, the rotation speeds are slowed. **Linear** "
        "interpolation divides every θ_i by the factor; **NTK-aware** raises the base instead, so fast pairs "
        "barely change; **YaRN** and **Llama 3** interpolate only the slow pairs and keep the fast ones. "
        "Inside the trained context any change is a perturbation, so the loss below shows how much each "
        "scheme disturbs the model it is applied to.")
    factor = st.select_slider("Scaling factor", [2.0, 4.0, 8.0, 16.0], value=4.0, key="rope_factor")
    freqs = pos.scaled_inv_freqs(view.config, factor)
    st.plotly_chart(charts.lines(range(len(freqs["none"])), {k: (v / freqs["none"]).numpy() for k, v in freqs.items()},
                                 title="θ_i after scaling ÷ original θ_i", x_title="pair i", log_y=True),
                    key="rope_scaled_freqs")
    texts = shipped_texts()
    if not texts:
        return
    c1, c2 = st.columns(2)
    name = c1.selectbox("Text", list(texts), key="rope_text")
    max_tokens = c2.select_slider("Tokens", [256, 512, 1024, 2048], value=512, key="rope_text_tokens")
    losses = scaling_losses(view, (view.source, name, float(factor), int(max_tokens)))
    if losses is not None:
        show_scaling_losses(name, losses)


def scaling_losses(view: PositionsView, run: tuple) -> dict | None:
    """The five losses of ``run`` (source, text, factor, tokens) once all are scored, else None: never on
    load. The scalings still missing run one at a time on a click; what was scored is kept."""
    kinds = pos.SCALING_KINDS
    kept = cache.scaling_losses_kept(*run)
    stopped = SCORING.stopped()  # a click ended the last run early
    if len(kept) == len(kinds):
        return kept
    if stopped is not None:
        say_stopped(stopped)
    missing = [kind for kind in kinds if kind not in kept]
    _, text, _, max_tokens = run
    n = len(shipped_text_ids(view.loaded, text, max_tokens))
    try:  # a run the memory budget refuses is said before it is offered
        cache.check_passes(view.loaded, n, len(missing), f"scoring {n} tokens under {len(missing)} scalings")
        step, how = cache.scaling_step_seconds(view.source, n)
    except PromptError as error:
        st.warning(plain(error))
        return None
    estimate = limits_.format_seconds(step * len(missing))
    what = f"the other {len(missing)} scalings" if kept else f"{len(kinds)} scalings"
    st.caption(f"Scoring {n:,} tokens under {what} takes about {estimate} here ({how}); Stop ends it between "
               "scalings and keeps those already scored.")
    if not st.button(f"Score the text under {what} (≈ {estimate})", key="rope_scaling_run"):
        return None
    score_missing(run, missing, n, estimate)
    kept = cache.scaling_losses_kept(*run)
    return kept if len(kept) == len(kinds) else None


def say_stopped(stopped: tuple) -> None:
    """What the run a click ended left (the Stop button's, or any other click while it ran, such as a
    changed setting): the scalings it scored (kept), and what a new run does."""
    kinds, at_factor = pos.SCALING_KINDS, cache.scaling_losses_kept(*stopped)
    _, text, factor, _ = stopped
    rest = [kind for kind in kinds if kind not in at_factor]
    what = (f"Scoring '{text}' at factor {factor:g} was stopped by a click (the Stop button, or any other click "
            f"while it ran, such as a changed setting)")
    if not at_factor:
        st.info(f"{what} before its first scaling was scored: nothing was kept. A new run scores all "
                f"{len(kinds)} scalings.")
        return
    st.info(f"{what} after {len(at_factor)} of the {len(kinds)} scalings: {_named(at_factor)} "
            f"{'was' if len(at_factor) == 1 else 'were'} scored and kept. A new run scores only the other "
            f"{len(rest)}: {_named(rest)}.")


def _named(kinds) -> str:
    """Scaling kinds in quotes, "none" said as no scaling (read bare, "none is kept" says nothing was)."""
    return ", ".join(f"“{kind}” (no scaling)" if kind == "none" else f"“{kind}”" for kind in kinds)


def score_missing(run: tuple, missing: list[str], n_tokens: int, estimate: str) -> None:
    """Score the ``missing`` scalings of ``run`` one by one under a progress bar, beside a Stop button."""
    source = run[0]
    with SCORING.bar(f"Scoring {_named(missing[:1])}… about {estimate} left", run) as update:
        try:  # a Stop click interrupts at the next bar update: the mark stays and says so next run
            for done, kind in enumerate(missing, 1):
                cache.score_scaling(*run, kind)
                step, _ = cache.scaling_step_seconds(source, n_tokens)  # the step just measured
                left = limits_.format_seconds(step * (len(missing) - done))
                update(done / len(missing), f"{_named([kind])} scored ({done} of {len(missing)}); about {left} left")
        except PromptError as error:  # over the memory budget
            st.warning(plain(error))


def show_scaling_losses(name: str, losses: dict) -> None:
    window = pos.smoothing_window(len(losses["none"]))
    smooth = {kind: pos.moving_average(values, window).numpy() for kind, values in losses.items()}
    st.plotly_chart(charts.lines(range(len(next(iter(smooth.values())))), smooth,
                                 title=f"Per-token loss (moving average of {window}) on '{name}'",
                                 x_title="position", y_title="nats"), key="rope_scaling_loss")
    st.dataframe(pos.loss_summary(losses), hide_index=True)
