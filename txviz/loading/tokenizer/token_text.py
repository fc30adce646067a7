"""Tokens as text a person can read, when a byte-level BPE splits one character over several tokens.

An emoji is four UTF-8 bytes; a byte-level vocabulary (GPT-2's, SmolLM2's) often spends two tokens on
it, neither of which is text on its own ("\\xf0\\x9f" then "\\x98\\x80"). Here every character is given
to the token holding its last byte: that token shows the glyph ("😀"), a token that only starts a
character shows "…" there, and each token keeps its own bytes for a tooltip. Bytes that never form a
character stay ``\\x..`` escapes; special tokens (BOS, sink) are never merged with their neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

CONTINUES = "…"  # shown where a token ends inside a character that a later token completes
# Invisible characters that reorder the text after them (embeddings, overrides, isolates, marks): written
# as they are, one token's "\u202e" would reverse every token drawn after it. They are shown as escapes.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def visible_controls(text: str) -> str:
    """``text`` with each bidirectional control character written as its ``\\u....`` escape."""
    return "".join(f"\\u{ord(c):04x}" if c in BIDI_CONTROLS else c for c in text)


@dataclass(frozen=True)
class TokenText:
    """One token for display. ``text``: the characters this token completes, then "…" if it ends
    inside a character; ``raw``: its own bytes; ``spans``: (first, last) token of each multi-token
    character it touches."""

    text: str
    raw: bytes
    spans: tuple[tuple[int, int], ...] = ()

    @property
    def hex(self) -> str:
        return self.raw.hex(" ")

    def tooltip(self, index: int) -> str:
        """"token 5 · bytes f0 9f · part of one character with tokens 5–6"."""
        parts = [f"token {index}"]
        if self.raw:
            parts.append(f"bytes {self.hex}")
        parts += [f"one character with token{'s' if last > first else ''} {first}–{last}"
                  for first, last in self.spans if (first, last) != (index, index)]
        return " · ".join(parts)


def _char_length(lead: int) -> int:
    """Bytes in the UTF-8 character that ``lead`` starts (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _characters(data: bytes) -> list[tuple[int, int, str]]:
    """(start, stop, text) of each character of ``data``; a byte that starts no valid character is
    its own ``\\x..`` escape."""
    out, pos = [], 0
    while pos < len(data):
        length = _char_length(data[pos])
        chunk = data[pos:pos + length] if length else b""
        try:
            text = chunk.decode("utf-8") if len(chunk) == length and length else None
        except UnicodeDecodeError:
            text = None
        if text is None:
            out.append((pos, pos + 1, f"\\x{data[pos]:02x}"))
            pos += 1
        else:
            out.append((pos, pos + length, visible_controls(text)))
            pos += length
    return out


def _run_texts(pieces: Sequence[bytes], first: int) -> list[TokenText]:
    """Readable texts of consecutive ordinary tokens ``first``, ``first + 1``, … (their bytes ``pieces``)."""
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece))
    owner = [i for i, piece in enumerate(pieces) for _ in piece]  # token of each byte
    texts = [[] for _ in pieces]
    open_tail = [False] * len(pieces)
    spans: list[set] = [set() for _ in pieces]
    for start, stop, char in _characters(b"".join(pieces)):
        first_token, last_token = owner[start], owner[stop - 1]
        texts[last_token].append(char)
        if first_token != last_token:
            for token in range(first_token, last_token):
                open_tail[token] = True
            for token in range(first_token, last_token + 1):
                spans[token].add((first + first_token, first + last_token))
    return [TokenText("".join(text) + (CONTINUES if tail else "") or "∅", piece, tuple(sorted(span)))
            for text, tail, piece, span in zip(texts, open_tail, pieces, spans)]


def readable_tokens(pieces: Sequence[bytes], special: Sequence[bool] | None = None,
                    special_text: Sequence[str] | None = None) -> list[TokenText]:
    """Each token's display text, a character split over tokens shown whole on the token that ends it.

    ``pieces``: each token's bytes (``Tokenizer.token_bytes``). ``special``: tokens that are markers
    (BOS, sink), shown as ``special_text`` (or their bytes as text) and never joined to a neighbour."""
    special = list(special) if special is not None else [False] * len(pieces)
    if len(special) != len(pieces):
        raise ValueError(f"{len(pieces)} tokens but {len(special)} special flags")
    out: list[TokenText] = []
    run_start = 0
    for i in range(len(pieces) + 1):
        if i == len(pieces) or special[i]:
            out += _run_texts(pieces[run_start:i], run_start)
            if i < len(pieces):
                label = special_text[i] if special_text is not None else pieces[i].decode("utf-8", "backslashreplace")
                out.append(TokenText(visible_controls(label), pieces[i]))
            run_start = i + 1
    return out
