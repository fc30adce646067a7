"""The metric every intervention here is scored by: the logit difference at the last position,
logit(answer) − logit(wrong) (Wang et al. 2022, IOI: the standard metric of activation patching, linear
in the logits so effects add up; Heimersheim & Nanda 2024 §3 on choosing it).

A word is scored by its first token: " suitcase" may be two tokens in a vocabulary, and the model
commits to the word with the first. ``AnswerTokens`` says which tokens were used.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from txviz.analysis.heads.detectors import unknown_token_ids


@dataclass(frozen=True)
class AnswerTokens:
    answer_id: int
    wrong_id: int
    answer_token: str
    wrong_token: str

    def to_dict(self) -> dict:
        return {"answer_token": {"id": self.answer_id, "text": self.answer_token},
                "wrong_token": {"id": self.wrong_id, "text": self.wrong_token}}


def first_token(tokenizer, word: str, label: str) -> tuple[int, str]:
    """The id and text of ``word``'s first token (no BOS): what the model names first."""
    if not word or not word.strip():
        raise ValueError(f"the {label} word is empty: give the word whose logit is measured, e.g. ' trophy'")
    encoding = tokenizer.encode(word, bos="none")
    if not encoding.ids:
        raise ValueError(f"the {label} word {word!r} has no tokens")
    if int(encoding.ids[0]) in unknown_token_ids(tokenizer):
        raise ValueError(f"the {label} word {word!r} is not in the model's vocabulary (it reads as the unknown token)")
    return int(encoding.ids[0]), encoding.tokens[0]


def answer_tokens(tokenizer, answer: str, wrong: str) -> AnswerTokens:
    answer_id, answer_token = first_token(tokenizer, answer, "answer")
    wrong_id, wrong_token = first_token(tokenizer, wrong, "wrong")
    if answer_id == wrong_id:
        raise ValueError(f"{answer!r} and {wrong!r} start with the same token {answer_token!r}: "
                         "their logit difference is 0 by construction; pick words that differ in the first token")
    return AnswerTokens(answer_id, wrong_id, answer_token, wrong_token)


def logit_diff(logits: torch.Tensor, answer_id: int, wrong_id: int) -> torch.Tensor:
    """logits (B, T, V) → (B,): logit(answer) − logit(wrong) at the last position."""
    last = logits[:, -1]
    return last[:, answer_id] - last[:, wrong_id]
