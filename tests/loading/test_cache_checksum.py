"""The float32 copy of a GGUF kept in TXVIZ_HOME carries the sha256 of its weights: bytes
flipped on disk are caught when the copy is read, the copy is discarded with a warning and rebuilt from
the GGUF, and the model's logits are the GGUF's own, never NaN."""

from __future__ import annotations

import struct
import warnings

import pytest
import torch
from gguf import GGMLQuantizationType as Q

from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf
from txviz.loading.gguf import float32_copy


@pytest.fixture
def tiny_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("TXVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(float32_copy, "_verified_copies", set())
    config = tiny()
    return write_gguf(tmp_path / "tiny.gguf", config, weights_of(config), qtype=Q.Q8_0)


def logits(loaded) -> torch.Tensor:
    with torch.no_grad():
        return loaded.model(torch.tensor([[3, 70, 71, 72, 259]]))


def flip_to_nan(copy, at_fraction: float = 0.5) -> None:
    """Write a float32 NaN into the weights' bytes (past the safetensors header), keeping the size."""
    data = bytearray(copy.read_bytes())
    header = 8 + struct.unpack_from("<Q", data)[0]
    at = header + int((len(data) - header) * at_fraction) // 4 * 4
    data[at:at + 4] = struct.pack("<f", float("nan"))
    copy.write_bytes(bytes(data))


def test_flipped_bytes_in_the_copy_are_caught_and_the_copy_rebuilt(tiny_gguf):
    reference = logits(float32_copy.load_gguf_cached(tiny_gguf, device="cpu"))
    copy = float32_copy.dequantized_copy_path(tiny_gguf)
    assert copy.is_file()
    flip_to_nan(copy)
    float32_copy._verified_copies.clear()  # a new process
    with pytest.warns(UserWarning, match="fail their checksum .* rebuilding it from tiny.gguf"):
        rebuilt = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert rebuilt.metadata["weights_from"] == str(tiny_gguf)
    torch.testing.assert_close(logits(rebuilt), reference, rtol=0, atol=0)
    float32_copy._verified_copies.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten copy verifies
        again = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert again.metadata["weights_from"] == str(copy)
    torch.testing.assert_close(logits(again), reference, rtol=0, atol=0)


def test_a_changed_copy_is_verified_again_even_in_the_same_process(tiny_gguf):
    float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    float32_copy.load_gguf_cached(tiny_gguf, device="cpu")  # verified once, kept by (path, size, mtime)
    copy = float32_copy.dequantized_copy_path(tiny_gguf)
    flip_to_nan(copy, 0.9)  # rewriting it gives it a new mtime
    with pytest.warns(UserWarning, match="fail their checksum"):
        loaded = float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    assert torch.isfinite(logits(loaded)).all()


def test_a_copy_without_a_checksum_is_stale(tiny_gguf):
    """Copies written before the checksum (format 1) are rebuilt, not trusted."""
    from safetensors.torch import load_file, save_file
    from safetensors import safe_open

    float32_copy.load_gguf_cached(tiny_gguf, device="cpu")
    copy = float32_copy.dequantized_copy_path(tiny_gguf)
    with safe_open(str(copy), framework="pt") as handle:
        metadata = handle.metadata()
    del metadata["weights_sha256"]
    save_file(load_file(str(copy)), str(copy), metadata={**metadata, "txviz_cache_format": "1"})
    float32_copy._verified_copies.clear()
    assert float32_copy.read_dequantized_copy(tiny_gguf) is None


def test_the_checksum_covers_names_shapes_and_bytes():
    state = {"a": torch.zeros(4), "b": torch.ones(2, 2)}
    digest = float32_copy.weights_sha256(state)
    assert digest == float32_copy.weights_sha256(dict(reversed(state.items())))
    assert digest != float32_copy.weights_sha256({"a": torch.zeros(4), "b": torch.ones(4)})
    assert digest != float32_copy.weights_sha256({"c": torch.zeros(4), "b": torch.ones(2, 2)})
    flipped = torch.ones(2, 2)
    flipped.view(-1).view(torch.int32)[3] ^= 1  # one bit
    assert digest != float32_copy.weights_sha256({"a": torch.zeros(4), "b": flipped})
