"""🤗 transformers as the reference: imported by the tests that run it, when they run, never when a test
module is collected; and its GGUF loading without the work it repeats.

Every pytest-xdist worker collects every test module, and importing transformers' model classes costs
about 3.5 CPU s. A test that runs transformers carries ``NEEDS_TRANSFORMERS`` (a module: ``pytestmark =
NEEDS_TRANSFORMERS``); tests/conftest.py keeps those tests on one worker, so the other never imports it.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path

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


@contextmanager
def gguf_read_once():
    """While open, ``gguf.GGUFReader`` builds one reader per file and ``gguf.get_tensor_name_map`` one map
    per (architecture, layer count); both are pure functions of their arguments, and transformers only
    reads what they return, so what it loads is unchanged.

    transformers opens a GGUF once for the config and once for the weights (and the SentencePiece reference
    a third time), and each reader parses the whole vocabulary again (SmolLM2 ~3 CPU s, Gemma 3 ~15); it
    builds the tensor-name map once per module of the model (~300 times, each ~5 ms). Measured 2026-12-02
    (load 3-10): SmolLM2's HF load 18.5 and 22.2 CPU s plain, 10.0 and 9.8 with both kept.
    txviz's own loader has its own reader class and is not affected.

    The one reader per file is built over a plain ndarray view of its memmap (``_PlainArrayReader``): gguf's
    own parsing code, unchanged, but each of its ~3 million slices of Gemma's vocabulary no longer passes
    through memmap's Python-level hooks, and neither do transformers' reads of those parts afterwards.
    The same fields, parts, types and tensor data (compared element by element on Gemma 3 270M); Gemma's
    reader 15.0 -> 4.5 CPU s, its HF load 27.9 -> 16.0 (2026-12-02, load 6).

    transformers dequantizes each tensor with ``gguf.dequantize``; while open that is txviz's
    ``dequantize_array``, the package's own block code on runs of whole blocks, held to the package's
    float32 bytes for every block type by tests/loading/test_gguf_dequantize.py (and on every tensor of
    both real models when it was written): the same weights, Gemma's 4.5 -> 0.9 CPU s."""
    import gguf

    import txviz.loading.gguf.reader  # noqa: F401  (binds its subclass to the real class before the patch)

    build, readers = _plain_array_reader(gguf.GGUFReader), {}

    def reader(path, *args, **kwargs):
        key = (str(Path(path).resolve()), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = build(path, *args, **kwargs)
        return readers[key]

    from txviz.loading.gguf.loader import dequantize_array

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "GGUFReader", reader)
        patch.setattr(gguf, "dequantize", dequantize_array)  # the package's bytes (tests/loading/test_gguf_dequantize.py)
        patch.setattr(gguf, "get_tensor_name_map", functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map))
        yield


def _plain_array_reader(package_reader: type) -> type:
    """``package_reader`` whose ``data`` (the memmap its ``__init__`` opens) is kept as a plain ndarray view:
    the same bytes, the memmap alive as the view's base, every slice of it plain numpy in C."""
    import numpy as np

    class _PlainArrayReader(package_reader):
        @property
        def data(self):
            return self._plain_data

        @data.setter
        def data(self, value):
            self._plain_data = value.view(np.ndarray)

    return _PlainArrayReader
