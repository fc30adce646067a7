"""Small hostile GGUF files for the hardening tests and tests.helpers.hostile_bench: a good tiny file
(tests.helpers.tiny_gguf) with a few bytes of its header changed."""

from __future__ import annotations

import struct
from pathlib import Path

OFFSET_THAT_WRAPS = 2 ** 64 - 32  # added to the data start, it wraps around to the header in C


def tiny_gguf(path: Path, metadata: dict | None = None, **config) -> Path:
    """A good tiny llama GGUF with a 3-item array under ``test.items`` (the array the 2^62 case patches)."""
    from gguf import GGUFValueType as T

    from tests.helpers.tiny_gguf import tiny, weights_of, write_gguf

    model = tiny(**config)
    return write_gguf(path, model, weights_of(model), metadata={"test.items": ([1, 2, 3], T.ARRAY), **(metadata or {})})


def patch_after(path: Path, after: bytes, fmt: str, value: int, skip: int = 4) -> Path:
    """Overwrite, ``skip`` bytes after the first ``after`` in the file (a key: then its value type), ``value``."""
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, data.index(after) + len(after) + skip, value)
    path.write_bytes(bytes(data))
    return path


def wrap_first_offset(path: Path) -> Path:
    """token_embd.weight's data offset set to OFFSET_THAT_WRAPS (its dims count, dims, type, then the offset)."""
    data = bytearray(path.read_bytes())
    at = data.index(b"token_embd.weight") + len(b"token_embd.weight")
    struct.pack_into("<Q", data, at + 4 + 8 * struct.unpack_from("<I", data, at)[0] + 4, OFFSET_THAT_WRAPS)
    path.write_bytes(bytes(data))
    return path
