"""The services' tests run on a tiny trained zoo model (4 layers, 4 heads, a word-level tokenizer,
a context of 128 tokens): loaded once, on the CPU, in well under a second."""

from pathlib import Path

import pytest

from txviz.loading import load

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def tiny():
    return load(ROOT / "assets" / "zoo" / "base_long", device="cpu")


@pytest.fixture(scope="session")
def story():
    """A held-out story the tiny model's vocabulary covers, cut to 24 words."""
    from app.services.zoo import first_story

    return " ".join(first_story().split()[:24])
