"""Rebuild a SentencePiece BPE tokenizer (GGUF ``tokenizer.ggml.model`` = "llama": Llama 1/2, Gemma) from
a GGUF file's vocabulary and scores, as a ``tokenizers`` BPE with byte fallback.

SentencePiece's BPE encoder (and llama.cpp's ``llm_tokenizer_spm``, which copies it) works on the text
with every space written as "▁" (U+2581) and repeatedly merges the adjacent pair of pieces whose
concatenation is in the vocabulary with the highest score; a character no piece covers becomes its
UTF-8 bytes, the ``<0xAB>`` tokens. The file lists no merges, so they are derived here: every way to cut a
normal token into two normal tokens is a merge, ranked by the token's score (higher first). With every
such pair listed, "lowest-ranked pair first" (``tokenizers``' BPE) is "highest-scoring result first".

Control tokens (``<bos>``, ``<start_of_turn>``) are special; user-defined ones (Gemma's "\\n\\n", runs of
spaces and tabs, ``<div>``) are matched whole before BPE (longest match first) and are never the result
of a merge. SentencePiece matches them in the normalized text, so a literal "▁" next to a space joins a
run of spaces; llama.cpp matches them in the raw text and would not. transformers' GGUF tokenizer agrees
with SentencePiece there, and so does this one.
"""

from __future__ import annotations

from typing import Sequence

import tokenizers
from tokenizers import AddedToken, decoders, models, normalizers

SPACE = "\u2581"  # SentencePiece's visible space
GGUF_NORMAL, GGUF_UNKNOWN, GGUF_CONTROL, GGUF_USER_DEFINED, GGUF_UNUSED, GGUF_BYTE = 1, 2, 3, 4, 5, 6


def derived_merges(tokens: Sequence[str], scores: Sequence[float], token_types: Sequence[int]) -> list[tuple[str, str]]:
    """Every (left, right) of normal tokens whose concatenation is a normal token, best score first."""
    normal = {t for t, kind in zip(tokens, token_types) if kind == GGUF_NORMAL}
    ranked = []
    for index, (token, score, kind) in enumerate(zip(tokens, scores, token_types)):
        if kind != GGUF_NORMAL or len(token) < 2:
            continue
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in normal and right in normal:
                ranked.append((-float(score), index, cut, left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def build_spm_backend(*, tokens: list[str], scores: list[float], token_types: list[int],
                      unknown_token: str | None, add_space_prefix: bool) -> tokenizers.Tokenizer:
    """The ``tokenizers`` equivalent of the file's SentencePiece model (no BOS added: see Tokenizer)."""
    if len(scores) != len(tokens) or len(token_types) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens but {len(scores)} scores and {len(token_types)} token types")
    # SentencePiece matches user-defined pieces in the text after spaces became "▁"; llama.cpp's converter
    # wrote Gemma's runs of "▁" back as spaces, so they are spelled with "▁" again to match there
    tokens = [t.replace(" ", SPACE) if kind == GGUF_USER_DEFINED else t for t, kind in zip(tokens, token_types)]
    vocab = {token: index for index, token in reversed(list(enumerate(tokens)))}  # first id wins on duplicates
    bpe = models.BPE(vocab=vocab, merges=derived_merges(tokens, scores, token_types), unk_token=unknown_token,
                     fuse_unk=True, byte_fallback=True)
    backend = tokenizers.Tokenizer(bpe)
    replace = normalizers.Replace(" ", SPACE)
    backend.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), replace]) if add_space_prefix else replace
    backend.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t, kind in zip(tokens, token_types) if kind == GGUF_CONTROL])
    backend.add_tokens([AddedToken(t, special=False, normalized=True)  # matched in the normalized text
                        for t, kind in zip(tokens, token_types) if kind == GGUF_USER_DEFINED])
    return backend
