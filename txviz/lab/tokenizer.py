"""The lab's word-level tokenizer: one token per word or punctuation mark, built on the story corpus.

A word-level vocabulary keeps every name, pet and colour a single token, so an induction or pronoun
head's attention lands on whole words. Built with the ``tokenizers`` library and saved as an ordinary
``tokenizer.json``: a ``Metaspace`` pre-tokenizer marks word starts with "▁" (and prepends one to each
run of text, so "Mary" opening a story and " Mary" inside it are the same token), punctuation is split
off, and the decoder restores the spaces. ``<|endoftext|>`` opens every document and is the model's
sink/BOS token; ``<|unk|>`` stands for words the corpus never used.

The vocabulary is counted, not trained: words sorted by (−count, word), after the two special
tokens, so the same stories always give the same ids.
"""

from __future__ import annotations

from collections import Counter

import tokenizers
from tokenizers import AddedToken, decoders, models, pre_tokenizers

from txviz.lab.corpus import DOCUMENT_SEPARATOR

UNKNOWN = "<|unk|>"
SPECIAL_TOKENS = (DOCUMENT_SEPARATOR, UNKNOWN)


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        pre_tokenizers.Punctuation(behavior="isolated"),
    ])


def word_counts(texts: list[str]) -> Counter:
    splitter = _pre_tokenizer()
    counts: Counter = Counter()
    for text in texts:
        counts.update(piece for piece, _ in splitter.pre_tokenize_str(text))
    return counts


def build_tokenizer(texts: list[str]) -> tokenizers.Tokenizer:
    """A WordLevel tokenizer whose vocabulary is every word of ``texts`` (which hold no separators)."""
    counts = word_counts(texts)
    words = sorted(counts, key=lambda word: (-counts[word], word))
    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *words])}
    backend = tokenizers.Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNKNOWN))
    backend.pre_tokenizer = _pre_tokenizer()
    backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    return backend


def unknown_words(backend: tokenizers.Tokenizer, text: str) -> list[str]:
    """The pieces of ``text`` that the vocabulary lacks (each became the unknown token), in order; [] for
    a tokenizer without an unknown token (a byte-level BPE can spell anything)."""
    token = getattr(backend.model, "unk_token", None)
    unknown_id = backend.token_to_id(token) if token else None
    if unknown_id is None:
        return []
    encoding = backend.encode(text, add_special_tokens=False)
    return [text[start:end] for token_id, (start, end) in zip(encoding.ids, encoding.offsets) if token_id == unknown_id]


def encode_stream(backend: tokenizers.Tokenizer, texts: list[str]) -> list[int]:
    """Token ids of the stories one after another, each opened by the separator."""
    separator = backend.token_to_id(DOCUMENT_SEPARATOR)
    ids: list[int] = []
    for encoding in backend.encode_batch(texts, add_special_tokens=False):
        ids.append(separator)
        ids.extend(encoding.ids)
    return ids
