"""Texts shipped in ``assets/texts``: plain English prose, written for txviz, for long-text loss and
perplexity (see assets/texts/README.md)."""

from __future__ import annotations

from pathlib import Path

TEXTS_DIR = Path(__file__).resolve().parents[2] / "assets" / "texts"
DEFAULT_TEXT = "how_a_model_reads"


def text_names() -> list[str]:
    return sorted(path.stem for path in TEXTS_DIR.glob("*.txt"))


def read_text(name: str = DEFAULT_TEXT) -> str:
    if name not in text_names():
        raise ValueError(f"no shipped text {name!r}; choose from {text_names()}")
    return (TEXTS_DIR / f"{name}.txt").read_text(encoding="utf-8")
