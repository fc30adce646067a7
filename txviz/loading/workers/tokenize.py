"""Encode one text with a tokenizer given as its JSON, in a capped child process.

A model file's tokenizer.json can carry its own regexes (a ``Split`` pre-tokenizer, a ``Replace``
normalizer). The Rust regex engine bounds each match attempt (onig's retry limit) but not their number:
``(a+)+c`` on 20 000 characters of ``"a" * 22 + "b"`` runs 5 minutes without a panic, holding the
interpreter lock of whatever process runs it. So such a tokenizer encodes here, where the wall clock and
the CPU limit stop it. Request: {"tokenizer": JSON text, "text"}; reply: {"ids", "offsets"}.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tokenizers

sys.path.insert(0, str(Path(__file__).parent))
from _serve import serve  # noqa: E402


def handle(request: dict) -> dict:
    backend = tokenizers.Tokenizer.from_str(request["tokenizer"])
    encoding = backend.encode(request["text"], add_special_tokens=False)
    return {"ids": list(encoding.ids), "offsets": [list(offset) for offset in encoding.offsets]}


if __name__ == "__main__":
    serve(handle)
