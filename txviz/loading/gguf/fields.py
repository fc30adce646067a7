"""The types a GGUF file's tokenizer arrays must have, checked before anything iterates them.

``list("abc")`` is ``["a", "b", "c"]``: a file that stores ``tokenizer.ggml.tokens`` as one string would
otherwise become a vocabulary of its characters, and merges or scores given as a string a list of
characters too. Every element of a GGUF array has the array's one type, so the discovery check
(txviz.loading.preflight), which sees only an array's first items, checks the same rule as the loader.
No torch here: the check runs where only a file's header was read.
"""

from __future__ import annotations

from typing import Any, Mapping

# key → (what the elements must be, how a person reads that)
TOKENIZER_ARRAYS: dict[str, tuple[tuple[type, ...], str]] = {
    "tokenizer.ggml.tokens": ((str,), "strings"),
    "tokenizer.ggml.merges": ((str,), "strings"),
    "tokenizer.ggml.scores": ((int, float), "numbers"),
    "tokenizer.ggml.token_type": ((int,), "integers"),
}


def _kind(value: Any) -> str:
    return "a string" if isinstance(value, str) else f"a value of type {type(value).__name__}"


def _allowed(kind: type, types: tuple[type, ...]) -> bool:
    """An element of this type is one of ``types`` (as ``isinstance`` says), and not a bool (an int to Python)."""
    return not issubclass(kind, bool) and issubclass(kind, types)


def tokenizer_field_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why the tokenizer arrays in ``metadata`` are unusable (one line), or None when they are lists of
    the right element type (or absent)."""
    for key, (types, described) in TOKENIZER_ARRAYS.items():
        if key not in metadata:
            continue
        value = metadata[key]
        if not isinstance(value, list):
            return f"metadata key {key!r} must be a list of {described}, got {_kind(value)} ({str(value)[:40]!r})"
        if all(_allowed(kind, types) for kind in set(map(type, value))):  # C-speed pass: 3 x 262k items on Gemma
            continue
        wrong = next(item for item in value if not _allowed(type(item), types))
        return f"metadata key {key!r} must be a list of {described}, but holds {_kind(wrong)} ({str(wrong)[:40]!r})"
    return None
