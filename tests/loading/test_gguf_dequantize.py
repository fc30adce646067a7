"""``dequantize_array`` (runs of whole blocks through the gguf package's block code) against the package's
own ``gguf.quants.dequantize``: the same float32 bytes for every quantization type the package decodes."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as Q

from txviz.loading.gguf import loader
from txviz.loading.gguf.loader import dequantize_array


def decodable(qtype: Q) -> bool:
    try:
        gguf.quants.dequantize(np.zeros((1, GGML_QUANT_SIZES[qtype][1]), np.uint8), qtype)
        return True
    except NotImplementedError:
        return False


BLOCK_TYPES = [q for q in Q if q in GGML_QUANT_SIZES and GGML_QUANT_SIZES[q][0] > 1 and decodable(q)]


def test_the_block_types_include_those_of_the_known_models():
    assert {Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q8_0, Q.Q4_K, Q.Q6_K} <= set(BLOCK_TYPES)


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda q: q.name)
def test_every_block_type_decodes_to_the_packages_bytes(qtype, monkeypatch):
    """Random bytes (every scale and code, NaN and infinite scales too) over several runs and a short last
    one: a run that slipped by a block, overlapped or stopped short would differ from the package."""
    block, type_size = GGML_QUANT_SIZES[qtype]
    monkeypatch.setattr(loader, "DEQUANTIZE_CHUNK_VALUES", 7 * block)  # runs of 7 blocks: rows of 3 straddle them
    data = np.random.default_rng(int(qtype)).integers(0, 256, size=(11, 3 * type_size), dtype=np.uint8)
    with np.errstate(all="ignore"):  # random scales include NaN and infinities
        expected, got = gguf.quants.dequantize(data, qtype), dequantize_array(data, qtype)
    assert got.dtype == expected.dtype == np.float32 and got.shape == expected.shape == (11, 3 * block)
    assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("qtype", [Q.F32, Q.F16])
def test_one_value_types_are_the_packages(qtype):
    data = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32 if qtype == Q.F32 else np.float16)
    assert dequantize_array(data, qtype).tobytes() == gguf.quants.dequantize(data, qtype).tobytes()


def test_a_row_of_part_of_a_block_is_refused_as_the_package_refuses_it():
    with pytest.raises(ValueError, match="not a multiple"):
        dequantize_array(np.zeros((2, 40), np.uint8), Q.Q8_0)  # Q8_0 blocks are 34 bytes
