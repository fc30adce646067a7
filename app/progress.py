"""Streamlit progress bars as the callbacks app/services take: a service reports ``progress(done,
total)`` (or ``progress(fraction, message)``) and never sees Streamlit; the bar goes when the run ends,
whether it finished or raised."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

import streamlit as st


@contextmanager
def step_bar(what: str, unit: str = "step") -> Iterator[Callable[[int, int], None]]:
    """A bar that says ``what: <unit> done of total, N s so far``."""
    bar = st.progress(0.0, text=f"{what}…")
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / max(total, 1), 1.0),
                     text=f"{what}: {unit} {done} of {total}, {time.perf_counter() - started:.0f} s so far")

    try:
        yield progress
    finally:
        bar.empty()


@contextmanager
def bar_or_spinner(what: str, long: bool, unit: str = "layer") -> Iterator[Callable[[int, int], None] | None]:
    """A step bar for a run long enough to follow, else a spinner (and no callback: nothing to draw)."""
    if long:
        with step_bar(what, unit) as progress:
            yield progress
    else:
        with st.spinner(f"{what}…"):
            yield None


@contextmanager
def message_bar(label: str) -> Iterator[Callable[[float, str], None]]:
    """A bar for runs that report ``progress(fraction, message)``: ``label message``, clamped to 0..1."""
    bar = st.progress(0.0, text=label)

    def progress(fraction: float, message: str) -> None:
        bar.progress(min(max(fraction, 0.0), 1.0), text=f"{label} {message}")

    try:
        yield progress
    finally:
        bar.empty()
