"""What the command line says while it works: progress lines on stderr, so stdout keeps only the result."""

from __future__ import annotations

import sys


def progress(fraction: float, message: str) -> None:
    print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)
