"""txviz's fast-array GGUF reader against the ``gguf`` package's own reader: the same key/values (strings,
floats, bools), value types, tensor table and tensor bytes, and a clear failure on a cut array."""

from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from tests.helpers.tiny_gguf_gemma import spm_vocab, write_gemma_gguf
from txviz import ModelConfig
from txviz.loading.gguf.reader import FastGGUFReader


def assert_same(path) -> None:
    fast, reference = FastGGUFReader(path), GGUFReader(path)
    assert list(fast.fields) == list(reference.fields)
    for key, field in reference.fields.items():
        assert fast.fields[key].contents() == field.contents(), key
        assert fast.fields[key].types == field.types, key
    assert fast.data_offset == reference.data_offset
    assert len(fast.tensors) == len(reference.tensors)
    for ours, theirs in zip(fast.tensors, reference.tensors):
        assert (ours.name, ours.tensor_type, ours.n_bytes) == (theirs.name, theirs.tensor_type, theirs.n_bytes)
        assert np.array_equal(ours.shape, theirs.shape) and np.array_equal(ours.data, theirs.data)


def test_llama_file_reads_the_same(tmp_path):
    config = tiny()
    assert_same(write_gguf(tmp_path / "m.gguf", config, weights_of(config), qtype=Q.Q8_0))


def test_gemma_file_with_float_and_bool_arrays_reads_the_same(tmp_path):
    config = ModelConfig(vocab_size=len(spm_vocab()[0]), d_model=64, n_layers=6, n_heads=4, n_kv_heads=1, head_dim=32,
                         ffn_hidden=96, ffn="geglu", qk_norm=True, sandwich_norm=True, sliding_window=8,
                         tie_embeddings=True)
    path = write_gemma_gguf(tmp_path / "m.gguf", "gemma3", config, weights_of(config), metadata={
        "{arch}.attention.sliding_window_pattern": ([True, False, True, True, False, True], GGUFValueType.ARRAY)})
    assert_same(path)


def test_a_string_array_cut_short_is_an_error(tmp_path):
    config = tiny()
    data = write_gguf(tmp_path / "m.gguf", config, weights_of(config)).read_bytes()
    start = data.index(b"tokenizer.ggml.tokens")  # then its type, item type, count and the strings
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: start + 200])
    with pytest.raises(ValueError, match="cut short|past the end"):
        FastGGUFReader(cut)
