"""The lab's data: the story corpus as token tensors, seeded training batches and validation windows.

    data = prepare_data(CorpusSettings(seed=0))
    x, y = data.batch(generator, batch_size=16, context=128)      # (B, T) inputs, (B, T) next tokens

Training windows start at random offsets of the training stream (drawn from a seeded
``torch.Generator``, so the data order is a function of the seed); validation windows cut the
held-out stream into consecutive, non-overlapping pieces, so every run scores the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import tokenizers
import torch

from txviz.lab.corpus import CorpusSettings, stories
from txviz.lab.tokenizer import UNKNOWN, build_tokenizer, encode_stream

VOCABULARY_SAMPLE = 2000  # stories counted for the vocabulary; every template word occurs in far fewer


@dataclass(frozen=True)
class LabData:
    settings: CorpusSettings
    tokenizer: tokenizers.Tokenizer
    train: torch.Tensor  # (N,) token ids, stories opened by <|endoftext|>
    val: torch.Tensor  # (M,)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def batch(self, generator: torch.Generator, batch_size: int, context: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` random windows of ``context`` + 1 tokens, split into inputs and targets."""
        if len(self.train) <= context + 1:
            raise ValueError(f"the training stream has {len(self.train)} tokens, fewer than a window of "
                             f"{context + 1}; generate more stories")
        starts = torch.randint(0, len(self.train) - context - 1, (batch_size,), generator=generator)
        windows = torch.stack([self.train[s:s + context + 1] for s in starts.tolist()])  # (B, T+1)
        return windows[:, :-1], windows[:, 1:]

    def val_windows(self, length: int) -> torch.Tensor:
        """(W, length + 1): the validation stream cut into consecutive windows (the rest dropped)."""
        n = (len(self.val) - 1) // length
        if n == 0:
            raise ValueError(f"the validation stream ({len(self.val)} tokens) is shorter than {length + 1}")
        starts = torch.arange(n) * length
        return torch.stack([self.val[s:s + length + 1] for s in starts.tolist()])


def held_out_windows(tokenizer: tokenizers.Tokenizer, settings: CorpusSettings, length: int) -> torch.Tensor:
    """(W, length + 1): the validation windows ``evaluate`` scores, rebuilt from a shipped tokenizer
    (the held-out stories only: no training story is generated)."""
    val = torch.tensor(encode_stream(tokenizer, stories("val", settings)))
    return LabData(settings, tokenizer, torch.empty(0, dtype=torch.long), val).val_windows(length)


def prepare_data(settings: CorpusSettings) -> LabData:
    train_texts, val_texts = stories("train", settings), stories("val", settings)
    tokenizer = build_tokenizer(train_texts[:VOCABULARY_SAMPLE])
    train, val = encode_stream(tokenizer, train_texts), encode_stream(tokenizer, val_texts)
    unknown = tokenizer.token_to_id(UNKNOWN)
    if unknown in train or unknown in val:
        raise AssertionError(f"the vocabulary of the first {VOCABULARY_SAMPLE} stories misses a word of the "
                             "corpus; raise VOCABULARY_SAMPLE")
    return LabData(settings, tokenizer, torch.tensor(train), torch.tensor(val))
