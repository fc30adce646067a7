"""🤗 transformers as the reference: imported by the tests that run it, when they run, never when a test
module is collected.

Every pytest-xdist worker collects every test module, and importing transformers' model classes costs
about 3.5 CPU s. A test that runs transformers carries ``NEEDS_TRANSFORMERS`` (a module: ``pytestmark =
NEEDS_TRANSFORMERS``); tests/conftest.py keeps those tests on one worker, so the other never imports it.
"""

from __future__ import annotations

from importlib.util import find_spec

import pytest

NEEDS_TRANSFORMERS = [
    pytest.mark.transformers,
    pytest.mark.skipif(find_spec("transformers") is None, reason="transformers is not installed"),
]


def needs_transformers(test):
    """``NEEDS_TRANSFORMERS`` on one test."""
    for mark in NEEDS_TRANSFORMERS:
        test = mark(test)
    return test
