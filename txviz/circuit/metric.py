"""What a circuit is scored by, read from the last position's logits: the logit difference of two
answers (Wang et al. 2022, IOI; linear in the logits) or one answer's log-probability (Hanna et al.
2024 use both kinds). A metric maps logits (B, V) to (B,), differentiably."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class LogitDiff:
    answer_id: int
    wrong_id: int

    def __call__(self, last_logits: torch.Tensor) -> torch.Tensor:
        return last_logits[:, self.answer_id] - last_logits[:, self.wrong_id]

    def describe(self) -> str:
        return "logit difference"


@dataclass(frozen=True)
class LogProb:
    answer_id: int

    def __call__(self, last_logits: torch.Tensor) -> torch.Tensor:
        wide = torch.promote_types(last_logits.dtype, torch.float32)  # half precision widened, float64 kept
        return torch.log_softmax(last_logits.to(wide), dim=-1)[:, self.answer_id]

    def describe(self) -> str:
        return "log-probability"


def make_metric(answer_id: int, wrong_id: int | None = None) -> LogitDiff | LogProb:
    """The logit difference of ``answer_id`` over ``wrong_id``, or ``answer_id``'s log-probability."""
    return LogProb(answer_id) if wrong_id is None else LogitDiff(answer_id, wrong_id)
