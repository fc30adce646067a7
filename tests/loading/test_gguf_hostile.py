"""Hostile GGUF files: numbers that would size huge structures, an array that claims
2^62 items, a tensor offset that wraps. Each is refused with one clear line, quickly and in little memory,
before any module, RoPE table or per-layer list is built from the file's numbers. The files are tiny
real ones with a few bytes changed, as an attacker would make them."""

from __future__ import annotations

import struct
import time
import tracemalloc
from pathlib import Path

import pytest
from gguf import GGUFValueType as T

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from tests.helpers.tiny_gguf_gemma import spm_vocab, write_gemma_gguf
from txviz import ModelConfig
from txviz.loading import load
from txviz.loading.errors import ModelLoadError

GEMMA3 = ModelConfig(vocab_size=len(spm_vocab()[0]), d_model=64, n_layers=6, n_heads=4, n_kv_heads=1, head_dim=32,
                     ffn_hidden=96, max_seq_len=64, norm_eps=2.0 ** -20, ffn="geglu", gelu_approximate="tanh",
                     embed_scale=8.0, tie_embeddings=True, rope_theta=1e6, sliding_window=8, rope_local_theta=10000.0,
                     layer_types=("sliding",) * 5 + ("full",), qk_norm=True, sandwich_norm=True, name="tiny-gemma3")


def patch_u32(path: Path, key: str, value: int) -> Path:
    """Set a uint32 key/value in place: the key's bytes, then its type (4 = UINT32), then the value."""
    data = bytearray(path.read_bytes())
    at = data.index(key.encode()) + len(key)
    assert struct.unpack_from("<I", data, at)[0] == T.UINT32
    struct.pack_into("<I", data, at + 4, value)
    path.write_bytes(bytes(data))
    return path


@pytest.fixture
def llama(tmp_path) -> Path:
    config = tiny()
    return write_gguf(tmp_path / "model.gguf", config, weights_of(config),
                      metadata={"test.items": ([1, 2, 3], T.ARRAY)})


@pytest.fixture
def gemma(tmp_path) -> Path:
    return write_gemma_gguf(tmp_path / "gemma.gguf", "gemma3", GEMMA3, weights_of(GEMMA3))


def refused(path: Path, match: str) -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ModelLoadError, match=match):
            load(path, device="cpu")
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - started < 10
    assert peak < 200 << 20, f"{peak:,} bytes allocated to refuse it"


def test_the_untouched_files_load(llama, gemma):
    assert load(llama, device="cpu").config.n_layers == 2
    assert load(gemma, device="cpu").config.n_layers == 6


@pytest.mark.parametrize("key, value, match", [
    ("llama.block_count", 10 ** 9, "n_layers=1,000,000,000 is beyond any real model"),
    ("llama.block_count", 1000, "1,000 layers, but the file holds only 21 tensors"),
    ("llama.block_count", 3, "layers"),  # one layer more than the tensors: named, not a KeyError later
    ("llama.embedding_length", 1 << 31, "beyond any real model|parameters"),
    ("llama.attention.key_length", 1 << 28, "key/value sizes 268435456/16 differ"),
    ("llama.feed_forward_length", 8192, "parameters, but the file's tensors hold"),
    ("llama.feed_forward_length", 100, "has shape .* but the metadata describes"),  # a near miss: named
    ("llama.attention.head_count", 2 ** 31, "beyond any real model|parameters"),
])
def test_numbers_that_would_size_huge_structures_are_refused_first(llama, key, value, match):
    refused(patch_u32(llama, key, value), match)


def test_a_gemma_file_claiming_a_billion_layers_builds_no_billion_layer_list(gemma):
    refused(patch_u32(gemma, "gemma3.block_count", 10 ** 9), "n_layers=1,000,000,000 is beyond any real model")


def test_an_array_claiming_2_to_the_62_items_is_refused_at_once(llama):
    data = bytearray(llama.read_bytes())
    at = data.index(b"test.items") + len(b"test.items")
    assert struct.unpack_from("<II", data, at)[0] == T.ARRAY
    struct.pack_into("<Q", data, at + 8, 2 ** 62)
    llama.write_bytes(bytes(data))
    refused(llama, "not a readable GGUF file")


@pytest.mark.parametrize("offset, match", [(2 ** 64 - 32, "runs past the end"), (7, "not aligned")])
def test_a_tensor_offset_outside_the_file_or_unaligned_is_refused(llama, offset, match):
    data = bytearray(llama.read_bytes())
    at = data.index(b"token_embd.weight") + len(b"token_embd.weight")
    n_dims = struct.unpack_from("<I", data, at)[0]
    struct.pack_into("<Q", data, at + 4 + 8 * n_dims + 4, offset)  # dims, then the type, then the offset
    llama.write_bytes(bytes(data))
    refused(llama, match)


def test_two_tensors_sharing_bytes_are_refused(llama):
    data = bytearray(llama.read_bytes())
    first = data.index(b"token_embd.weight") + len(b"token_embd.weight")
    second = data.index(b"output_norm.weight") + len(b"output_norm.weight")
    offset_of = lambda at: at + 4 + 8 * struct.unpack_from("<I", data, at)[0] + 4  # noqa: E731
    struct.pack_into("<Q", data, offset_of(second), struct.unpack_from("<Q", data, offset_of(first))[0])
    llama.write_bytes(bytes(data))
    refused(llama, "overlap")


@pytest.mark.parametrize("scaling, theta, match", [
    (dict(kind="yarn", factor=4.0, original_max_seq_len=16), 1.0, "logarithm of rope_theta"),
    (dict(kind="ntk", factor=2.0), 10000.0, "more than 2 rotated dimensions"),
    (dict(kind="yarn", factor=4.0, original_max_seq_len=16, beta_fast=1e-320), 10000.0, "beta_fast"),
    (dict(kind="llama3", factor=8.0, original_max_seq_len=16, low_freq_factor=4.0, high_freq_factor=4.0), 10000.0,
     "low_freq_factor < high_freq_factor"),
])
def test_rope_scalings_that_would_divide_by_zero_are_config_errors(scaling, theta, match):
    """These once raised ZeroDivisionError / OverflowError from inside the RoPE formulas."""
    from txviz.config import ConfigError

    head_dim = 2 if scaling["kind"] == "ntk" else 16
    with pytest.raises(ConfigError, match=match):
        ModelConfig(vocab_size=10, d_model=4 * head_dim, n_layers=1, n_heads=4, ffn_hidden=8, head_dim=head_dim,
                    rope_theta=theta, rope_scaling=scaling)


def test_any_other_failure_inside_a_loader_is_a_model_load_error(llama, monkeypatch):
    """One boundary: whatever a library under the loader raises (here OverflowError) reaches the caller
    as a ModelLoadError naming the file and the cause, which the app and the CLI show as a message."""
    from txviz.loading.gguf import loader as gguf

    def overflow(*args, **kwargs):
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(gguf, "config_from_header", overflow)
    with pytest.raises(ModelLoadError, match=r"model\.gguf: could not be loaded \(OverflowError: int too large"):
        load(llama, device="cpu")


@needs_transformers
@pytest.mark.parametrize("variant, changes, match", [
    ("llama_gqa", {"num_hidden_layers": 10 ** 9}, "beyond any real model"),
    ("qwen2_window", {"num_hidden_layers": 10 ** 9, "use_sliding_window": True}, "beyond any real model"),
    ("llama_gqa", {"head_dim": 1 << 28}, "beyond any real model|head_dim"),
])
def test_a_hugging_face_config_claiming_huge_sizes_is_refused_at_once(tmp_path, variant, changes, match):
    from tests.helpers.tiny_hf import build, edit_config, save

    directory = save(build(variant), tmp_path / variant)
    edit_config(directory, lambda config: {**config, **changes})
    refused(directory, match)


def _as_one_string(key: str):
    def add(self, values, *args, **kwargs):
        self.add_string(key, " ".join(str(v) for v in values))
    return add


@pytest.mark.parametrize("method, key", [
    ("add_token_list", "tokenizer.ggml.tokens"),
    ("add_token_merges", "tokenizer.ggml.merges"),
    ("add_token_types", "tokenizer.ggml.token_type"),
    ("add_token_scores", "tokenizer.ggml.scores"),
])
def test_a_string_where_a_tokenizer_list_belongs_is_refused(tmp_path, monkeypatch, method, key):
    """``list("abc")`` would make a vocabulary of the string's characters."""
    import gguf

    config = tiny()
    if key == "tokenizer.ggml.scores":  # the tiny byte-level vocabulary has no scores: add them as the string
        extra = {key: ("0.5 0.25", T.STRING)}
    else:
        extra = {}
        monkeypatch.setattr(gguf.GGUFWriter, method, _as_one_string(key))
    path = write_gguf(tmp_path / "string.gguf", config, weights_of(config), metadata=extra)
    refused(path, f"metadata key '{key}' must be a list of .*, got a string")


def test_a_list_of_the_wrong_element_type_is_refused(llama, tmp_path):
    config = tiny()
    path = write_gguf(tmp_path / "numbers.gguf", config, weights_of(config),
                      metadata={"tokenizer.ggml.scores": (["a", "b"], T.ARRAY)})
    refused(path, "'tokenizer.ggml.scores' must be a list of numbers, but holds a string")
