"""The metric every intervention here is scored by: the logit difference at the last position,
logit(answer) − logit(wrong) (Wang et al. 2022, IOI: the standard metric of activation patching, linear
in the logits so effects add up; Heimersheim & Nanda 2024 on choosing it).

A word is scored by its first token as it would follow a space in a sentence (the app's rule,
txviz.analysis.coref.answer.as_next_word: "suitcase" is read as " suitcase"): " suitcase" may be two
tokens in a vocabulary, and the model commits to the word with the first. ``AnswerTokens`` says which
tokens were used, and of which word's tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from txviz.analysis.coref.answer import as_next_word
from txviz.analysis.heads.detectors import unknown_token_ids


@dataclass(frozen=True)
class AnswerTokens:
    answer_id: int
    wrong_id: int
    answer_token: str
    wrong_token: str
    answer_pieces: tuple[str, ...] = ()  # every token of the word as scored (" suit", "case")
    wrong_pieces: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"answer_token": {"id": self.answer_id, "text": self.answer_token, "of": list(self.answer_pieces)},
                "wrong_token": {"id": self.wrong_id, "text": self.wrong_token, "of": list(self.wrong_pieces)}}


def word_tokens(tokenizer, word: str, label: str) -> tuple[int, tuple[str, ...]]:
    """The id of ``word``'s first token as it would follow a space (``as_next_word``, no BOS), and the
    texts of all its tokens: the first is what the model names first."""
    if not word or not word.strip():
        raise ValueError(f"the {label} word is empty: give the word whose logit is measured, e.g. 'trophy'")
    encoding = tokenizer.encode(as_next_word(word), bos="none")
    if not encoding.ids:
        raise ValueError(f"the {label} word {word!r} has no tokens")
    if int(encoding.ids[0]) in unknown_token_ids(tokenizer):
        raise ValueError(f"the {label} word {word!r} is not in the model's vocabulary (it reads as the unknown token)")
    return int(encoding.ids[0]), tuple(encoding.tokens)


def answer_tokens(tokenizer, answer: str, wrong: str) -> AnswerTokens:
    answer_id, answer_pieces = word_tokens(tokenizer, answer, "answer")
    wrong_id, wrong_pieces = word_tokens(tokenizer, wrong, "wrong")
    if answer_id == wrong_id:
        raise ValueError(f"{answer.strip()!r} and {wrong.strip()!r} start with the same token {answer_pieces[0]!r}: "
                         "their logit difference is 0 by construction; pick words that differ in the first token")
    return AnswerTokens(answer_id, wrong_id, answer_pieces[0], wrong_pieces[0], answer_pieces, wrong_pieces)


def logit_diff(logits: torch.Tensor, answer_id: int, wrong_id: int) -> torch.Tensor:
    """logits (B, T, V) → (B,): logit(answer) − logit(wrong) at the last position."""
    last = logits[:, -1]
    return last[:, answer_id] - last[:, wrong_id]
