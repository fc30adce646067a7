"""What one llama.cpp architecture adds to the loader's common reading of a GGUF file.

Every architecture llama.cpp writes shares most of a file's shape: ``<arch>.block_count``,
``<arch>.embedding_length`` … and tensors ``blk.{i}.attn_q.weight`` … (gguf-py's ``constants.py`` and
``tensor_mapping.py``). What differs is small and named here, once per architecture, as plain data:

* ``permuted``: llama.cpp's converter reorders each Q and K head's rows so RoPE can rotate adjacent
  pairs (only for the architectures it runs with "normal" RoPE, llama among them); those rows are put back;
* ``layer_names``: per-layer tensors beyond the common table (Gemma's post-norms);
* ``fused``: a tensor holding several of txviz's, stacked by rows, split in that order (Phi-3's
  ``attn_qkv`` is q, k, v; its ``ffn_up`` is gate, then up);
* ``partial_rotary``: ``rope.dimension_count`` below the head size is RoPE on that many leading
  dimensions (rotate-half within them), as the architecture's NEOX-style RoPE does; elsewhere it is refused;
* ``fields``: ModelConfig fields read from the architecture's own keys (or fixed by llama.cpp's
  ``llama-model.cpp`` for it), given the common ones.

The registry of supported architectures is ``txviz.loading.gguf.families``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from txviz.loading.errors import ModelLoadError


class ArchKeys:
    """A header's ``<arch>.*`` keys, read as checked numbers, and which tensors it lists."""

    def __init__(self, header):
        self.header = header
        self.architecture = header.architecture
        self.path = header.path

    def raw(self, key: str, default: Any = None) -> Any:
        return self.header.arch_key(key, default)

    def number(self, key: str, kind: type = int, default: Any = None) -> Any:
        """``<arch>.<key>`` as ``kind`` (``default`` when absent); a string, list or fractional count where a
        number belongs is a ModelLoadError naming the key."""
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (kind is int and isinstance(value, float) and not value.is_integer()):
            raise ModelLoadError(f"{self.path}: metadata key '{self.architecture}.{key}' must be "
                                 f"{'an integer' if kind is int else 'a number'}, got {str(value)[:60]!r}")
        return kind(value)

    def has_tensor(self, name: str) -> bool:
        return name in self.header.tensor_types


def no_fields(keys: ArchKeys, common: Mapping[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class GGUFFamily:
    architecture: str  # general.architecture as llama.cpp writes it
    permuted: bool = False
    layer_names: Mapping[str, str] = field(default_factory=dict)  # blk.{i}.<key> → layers.{i}.<value>
    fused: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # blk.{i}.<key> → parts, by rows
    partial_rotary: bool = False
    fields: Callable[[ArchKeys, Mapping[str, Any]], dict[str, Any]] = no_fields
