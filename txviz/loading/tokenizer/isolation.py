"""Which tokenizers encode in a child process, and the call that does it: a hostile
tokenizer.json must not hang or exhaust the app.

A tokenizer.json may bring regexes of its own (``Split`` pre-tokenizers, ``Replace`` normalizers). The
Rust engine stops one catastrophic match attempt (onig's retry limit: a ``PanicException``), but not a
text made of many attempts each just under it: with ``(a+)+c``, 100 characters of ``"a" * 22 + "b"``
take 2 s and 20 000 take 5 minutes (measured here, load 5), with the interpreter lock held, so the prompt
cap (TXVIZ_MAX_PROMPT_CHARS, 100 000) bounds nothing useful. Such a tokenizer encodes in a capped child
(txviz.loading.isolated, worker ``tokenize``): a hostile text stops after ``encode_limits(len(text))`` and
only its own request waits. The cost is a child per encode (~0.3 s), paid only by tokenizers whose
regexes are not among the published ones below, which txviz's own GGUF pre-tokenizers also run
in-process (GPT-2's, Llama 3's, Qwen2's), or the built-in ones (ByteLevel, Whitespace, Digits, …).
"""

from __future__ import annotations

import json

import tokenizers

from txviz.loading.errors import TokenizerError
from txviz.loading.isolated import IsolatedError, Limits, run_worker
from txviz.loading.tokenizer.bpe import GPT2_SPLIT, LLAMA3_SPLIT, QWEN2_SPLIT

# a legitimate 100k-character prompt takes 0.9–2.4 s in the child at load 11: 3.5 s refuses none of them,
# and loading the model, starting the child and its tokenizer (~1.3 s at load 2.5) fit in a refusal's 5 s
ENCODE_LIMITS = Limits(seconds=3.5, memory_bytes=1 << 30)
# Legitimate encoding is linear in the text, so the wall limit is too: a short hostile prompt is refused
# in about a second, and a 100k-character one gets ENCODE_LIMITS.seconds.
BASE_SECONDS, SECONDS_PER_CHAR = 1.0, 2.5e-5


def encode_limits(n_chars: int) -> Limits:
    """The child's limits for a text of ``n_chars`` characters: 1 s + 25 µs per character, at most
    ENCODE_LIMITS.seconds (a 2 000-character prompt: 1.05 s; 100 000: 3.5 s)."""
    seconds = min(ENCODE_LIMITS.seconds, BASE_SECONDS + SECONDS_PER_CHAR * n_chars)
    return Limits(seconds=seconds, memory_bytes=ENCODE_LIMITS.memory_bytes)


KNOWN_PATTERNS = frozenset({GPT2_SPLIT, LLAMA3_SPLIT, QWEN2_SPLIT})


def _regexes(component) -> set[str]:
    """Every ``{"Regex": pattern}`` in a normalizer or pre-tokenizer (nested Sequences included)."""
    if component is None:
        return set()
    found, stack = set(), [json.loads(component.__getstate__())]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("Regex"), str):
                found.add(node["Regex"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def untrusted_regexes(backend: tokenizers.Tokenizer) -> set[str]:
    """The regexes ``backend`` runs on text that are not among the published ones txviz knows."""
    return (_regexes(backend.normalizer) | _regexes(backend.pre_tokenizer)) - KNOWN_PATTERNS


def encode_in_child(tokenizer_json: str, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """(ids, offsets) of ``text``, encoded in a capped child; a TokenizerError past its limits or for
    text that is not Unicode (a lone surrogate), as the in-process path says it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TokenizerError(f"text is not valid Unicode (a lone surrogate?): {exc}") from None
    try:
        reply = run_worker("tokenize", {"tokenizer": tokenizer_json, "text": text}, encode_limits(len(text)))
    except IsolatedError as error:
        raise TokenizerError(f"the model's tokenizer failed to encode the text: {error}") from None
    return [int(i) for i in reply["ids"]], [(int(a), int(b)) for a, b in reply["offsets"]]


__all__ = ["ENCODE_LIMITS", "encode_in_child", "encode_limits", "untrusted_regexes"]
