"""Argument types shared by the commands: counts refused at parse time, with argparse's own message."""

from __future__ import annotations

import argparse


def positive(text: str, most: int | None = None) -> int:
    """argparse type: a whole number of at least 1 (a count of tokens, repeats or threads) and at most
    ``most``, refused at parse time."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(f"must be at most {most:,}, got {value:,}")
    return value
