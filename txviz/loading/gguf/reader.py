"""``gguf.GGUFReader`` with a fast path for array key/values, which is where big vocabularies spend their time.

The package's reader builds every array element as its own numpy slice of an ``np.memmap``: for Gemma 3's
262 144 tokens, scores and types that is ~3 million slices through numpy's Python-level memmap hooks, about
40 s on two busy cores (SmolLM2's 49k tokens and merges: ~2 s). Here an array of strings is walked with plain
byte arithmetic and an array of numbers is one slice; everything else (magic, version, alignment, the tensor
table, duplicate names) is the package's own code, and ``ReaderField.contents()`` returns the same values.
Only little-endian files on little-endian hosts take the fast path; anything else falls back unchanged.

The tensor table is checked before the package builds its views (``_build_tensors``), in Python integers
that cannot wrap: every tensor's data aligned, inside the file and apart from every other's. An offset of
2^64 − 32 would otherwise wrap around in uint64 arithmetic and read the header as weights.
"""

from __future__ import annotations

import sys

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType

_LENGTH_BYTES = 8  # every GGUF string starts with its byte length as a uint64


class FastGGUFReader(GGUFReader):
    """Drop-in for ``GGUFReader(path)`` (read-only)."""

    def _build_tensors(self, start_offs: int, fields) -> None:
        spans = sorted(_tensor_span(field, int(start_offs), int(self.alignment), len(self.data)) for field in fields)
        for (_, end, name), (start, _, other) in zip(spans, spans[1:]):
            if start < end:
                raise ValueError(f"tensors {name} and {other} overlap in the file")
        super()._build_tensors(start_offs, fields)

    def _get_field_parts(self, orig_offs: int, raw_type: int):
        if GGUFValueType(raw_type) != GGUFValueType.ARRAY or self.byte_order != "I" or sys.byteorder != "little":
            return super()._get_field_parts(orig_offs, raw_type)
        item_type, count = self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)
        if len(item_type) != 1 or len(count) != 1:
            raise ValueError(f"array header at offset {orig_offs} is cut short")
        start = orig_offs + 12
        kind = GGUFValueType(item_type[0])
        if kind == GGUFValueType.STRING:
            size, parts = self._string_parts(start, int(count[0]))
        elif kind in self.gguf_scalar_to_np:
            size, parts = self._number_parts(start, int(count[0]), self.gguf_scalar_to_np[kind])
        else:  # nested arrays: rare and small
            return super()._get_field_parts(orig_offs, raw_type)
        types = [GGUFValueType.ARRAY] + ([kind] if count[0] else [])
        return 12 + size, [item_type, count, *parts], list(range(2, 2 + len(parts))), types

    def _number_parts(self, start: int, count: int, dtype) -> tuple[int, list[np.ndarray]]:
        values = self._get(start, dtype, count)
        if len(values) != count:
            raise ValueError(f"array of {count} numbers at offset {start} is cut short")
        return int(values.nbytes), [values] if count else []

    def _string_parts(self, start: int, count: int) -> tuple[int, list[np.ndarray]]:
        """Each string's bytes as its own part (what ``contents()`` decodes), found by walking the lengths."""
        plain = self.data.view(np.ndarray)  # slicing a plain view skips memmap's per-slice Python hooks
        raw, end = memoryview(plain), len(plain)
        parts, offset = [], start
        for _ in range(count):
            if offset + _LENGTH_BYTES > end:
                raise ValueError(f"array of {count} strings at offset {start} is cut short")
            length = int.from_bytes(raw[offset:offset + _LENGTH_BYTES], "little")
            offset += _LENGTH_BYTES
            if length > end - offset:
                raise ValueError(f"string of {length} bytes at offset {offset} runs past the end of the file")
            parts.append(plain[offset:offset + length])
            offset += length
        return offset - start, parts


def _tensor_span(field, data_start: int, alignment: int, file_size: int) -> tuple[int, int, str]:
    """(start, end, name) of one tensor's bytes, or ValueError if they are not inside the file."""
    _, name_data, _, dims, raw_type, offset = field.parts
    name = bytes(name_data).decode("utf-8", errors="replace")[:80]
    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(int(raw_type[0]))]
    except (ValueError, KeyError):
        raise ValueError(f"tensor {name} has an unknown type {int(raw_type[0])}") from None
    elements = 1
    for dim in dims.tolist():
        elements *= int(dim)  # Python integers: a product of huge dims cannot wrap to something small
    size, relative = elements * type_size // block, int(offset[0])
    if relative % alignment:
        raise ValueError(f"tensor {name}'s data offset {relative} is not aligned to {alignment} bytes")
    start = data_start + relative
    if start + size > file_size:
        raise ValueError(f"tensor {name} ({size:,} bytes at offset {start:,}) runs past the end of the "
                         f"{file_size:,}-byte file")
    return start, start + size, name
