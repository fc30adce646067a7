"""Process-wide caches for the MoE and design-tradeoffs pages: the lab's zoo models (tiny, so several
stay loaded beside the sidebar's model), their routing on the lab's held-out stories, and the
measurements the tradeoffs page runs on this machine (kept once run, so one visitor's measurement
serves every session; a button starts one, with a progress bar).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st
import torch

from txviz.analysis.moe import ROUTER_CAPTURES, Routing, measure_routing
from txviz.loading import load
from txviz.loading.loaded import LoadedModel
from txviz.loading.zoo import EVAL_FILE, SHIPPED_ZOO, WEIGHTS_FILE
from txviz.capture.trace import Trace, trace

MOE_VARIANTS = ("moe_top1", "moe_top1_balanced", "moe_top2", "moe_top2_balanced")
VALIDATION_WINDOWS = 64  # × the training context (128): 8192 held-out tokens per measurement


def trained(names) -> list[str]:
    """The variants among ``names`` the shipped zoo holds (weights and evaluation written)."""
    return [n for n in names if (SHIPPED_ZOO / n / WEIGHTS_FILE).is_file() and (SHIPPED_ZOO / n / EVAL_FILE).is_file()]


def zoo_path(name: str) -> str:
    return str(SHIPPED_ZOO / name)


@st.cache_resource(show_spinner=False, max_entries=12)
def zoo_model(name: str) -> LoadedModel:
    if name not in trained([name]):
        raise FileNotFoundError(f"the zoo has no trained {name!r} (txviz lab train {name})")
    return load(Path(zoo_path(name)), device="cpu")


@st.cache_resource(show_spinner=False, max_entries=4)
def validation_windows(name: str, n_windows: int = VALIDATION_WINDOWS) -> torch.Tensor:
    """(W, T) consecutive windows of the lab's held-out stories, each story opened by <|endoftext|>,
    encoded with the variant's own tokenizer; T = its training context."""
    from txviz.lab.corpus import stories
    from txviz.lab.zoo import CORPUS

    loaded = zoo_model(name)
    context = loaded.config.max_seq_len
    ids: list[int] = []
    for story in stories("val", CORPUS):
        ids.extend(loaded.tokenizer.encode(story, bos="bos").ids)
        if len(ids) >= n_windows * context:
            break
    usable = len(ids) // context * context
    return torch.tensor(ids[:min(usable, n_windows * context)]).reshape(-1, context)


@st.cache_resource(show_spinner="Routing held-out stories through the zoo model…", max_entries=8)
def zoo_routing(name: str, n_windows: int = VALIDATION_WINDOWS) -> Routing:
    return measure_routing(zoo_model(name).model, validation_windows(name, n_windows))


@st.cache_resource(show_spinner=False, max_entries=32)
def zoo_text_trace(name: str, text: str) -> tuple[tuple[str, ...], Trace]:
    """(tokens, router trace) of ``text`` under a zoo variant, cut to its context."""
    loaded = zoo_model(name)
    encoding = loaded.tokenizer.encode(text, bos="bos")
    ids = encoding.ids[:loaded.config.max_seq_len]
    return encoding.tokens[:len(ids)], trace(loaded.model, torch.tensor(ids), capture=ROUTER_CAPTURES)


@st.cache_resource(show_spinner="Scoring the held-out stories window by window…", max_entries=16)
def zoo_window_losses(name: str) -> torch.Tensor:
    """(W,) mean loss of each held-out window evaluate() scores (their mean is eval.json's val_loss):
    the spread that gives the evaluation noise. Kept in eval.json by the lab; scored here if absent."""
    from txviz.lab.data import held_out_windows
    from txviz.lab.evaluate import window_losses
    from txviz.lab.zoo import CORPUS, stored_window_losses

    stored = stored_window_losses(SHIPPED_ZOO / name)
    if stored is not None:
        return stored
    loaded = zoo_model(name)
    windows = held_out_windows(loaded.tokenizer.backend, CORPUS, loaded.config.max_seq_len)
    return window_losses(loaded.model, windows)


def first_story() -> str:
    from txviz.lab.corpus import stories
    from txviz.lab.zoo import CORPUS

    return stories("val", CORPUS)[0]


# ---- measurements kept once run ---------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def _measurements() -> dict:
    return {}


def measured(key: tuple):
    """A measurement already run (by any session), or None."""
    return _measurements().get(key)


def measure(key: tuple, run: Callable[[Callable[[float, str], None]], object], label: str):
    """Run ``run(progress)`` under a progress bar and keep its result for every session."""
    bar = st.progress(0.0, text=label)

    def progress(fraction: float, message: str) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=f"{label} {message}")

    result = run(progress)
    bar.empty()
    _measurements()[key] = result
    return result
