"""Progress callbacks: ``progress(fraction, message)``, fraction in [0, 1]. A fetch and a load report
through these few helpers, so a slice of a longer task can report its own 0–1 into its share."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[float, str], None]


def report_to(progress: Progress | None, fraction: float, message: str) -> None:
    if progress is not None:
        progress(min(max(fraction, 0.0), 1.0), message)


def scaled(progress: Progress | None, start: float, width: float) -> Progress | None:
    return None if progress is None else (lambda f, m: report_to(progress, start + width * f, m))


def monotonic(progress: Progress | None) -> Progress | None:
    """``progress`` that never goes back (slices of a fetch meet up to float rounding)."""
    if progress is None:
        return None
    furthest = [0.0]

    def report(fraction: float, message: str) -> None:
        furthest[0] = max(furthest[0], fraction)
        progress(furthest[0], message)
    return report
