"""A real byte-level BPE tokenizer like SmolLM2's, small enough to build in a test."""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer, models, pre_tokenizers
from tokenizers.pre_tokenizers import ByteLevel

SINK = "<|endoftext|>"


@dataclass(frozen=True)
class Encoding:
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    special: tuple[bool, ...]


class ByteLevelTokenizer:
    """Byte-level BPE like SmolLM2's (Digits + ByteLevel pre-tokenizer), with a few merges so that
    "Mary" and " she" are one token each and "John" is four."""

    def __init__(self):
        vocab = {ch: i for i, ch in enumerate(sorted(ByteLevel.alphabet()))}
        merges = [("M", "a"), ("Ma", "r"), ("Mar", "y"), ("Ġ", "s"), ("Ġs", "h"), ("Ġsh", "e")]
        for a, b in merges:
            vocab[a + b] = len(vocab)
        self._tokenizer = Tokenizer(models.BPE(vocab, merges))
        self._tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), ByteLevel(add_prefix_space=False)])
        self._tokenizer.add_special_tokens([SINK])
        self.vocab_size = self._tokenizer.get_vocab_size()

    def encode(self, text: str, bos: str = "none") -> Encoding:
        e = self._tokenizer.encode(text, add_special_tokens=False)
        ids, tokens, offsets, special = list(e.ids), list(e.tokens), list(e.offsets), [False] * len(e.ids)
        if bos != "none":  # the test model has no BOS of its own: both prepend the sink
            ids, tokens = [self._tokenizer.token_to_id(SINK)] + ids, [SINK] + tokens
            offsets, special = [(0, 0)] + offsets, [True] + special
        return Encoding(tuple(ids), tuple(tokens), tuple(offsets), tuple(special))
