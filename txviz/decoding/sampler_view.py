"""The sampler's view of one step's next-token distribution: the raw softmax, the same after the
temperature, and after top-k and top-p with renormalisation: the tensor the token is drawn from
(txviz.generate.sampling_probs, the code ``generate`` samples with), so what the record shows is
exactly what was sampled. The draw itself is generate's too (``draw_token``).
"""

from __future__ import annotations

from typing import Callable

import torch

from txviz.decoding.step import Candidate
from txviz.generate import Sampling, draw_token, sampling_probs

TokenText = Callable[[int], str]


class SamplerView:
    """logits (1, V) of one step and the sampling settings → candidates, the chosen token's record."""

    def __init__(self, logits: torch.Tensor, sampling: Sampling, token_text: TokenText | None = None):
        self.sampling, self._text = sampling, token_text
        self.logits = logits[0].float()  # (V,)
        self.sampled = sampling_probs(logits, sampling)  # (1, V): what the draw uses
        self._probs = torch.softmax(self.logits, dim=-1)  # (V,)
        self._tempered = self._probs if sampling.greedy else torch.softmax(self.logits / sampling.temperature, dim=-1)

    def draw(self, generator: torch.Generator | None) -> int:
        return int(draw_token(self.sampled, self.sampling, generator)[0])

    @property
    def kept(self) -> int:
        """How many tokens the sampler could still draw."""
        return int((self.sampled > 0).sum())

    def candidates(self, n: int) -> tuple[Candidate, ...]:
        """The ``n`` most probable tokens by raw logits, largest first."""
        if n == 0:
            return ()
        ids = torch.topk(self.logits, min(n, self.logits.shape[-1])).indices  # (n,)
        return self._records(ids, ranks=range(1, len(ids) + 1))

    def candidate(self, token: int) -> Candidate:
        """The record of any one token, with its rank among all (1 + how many score above it)."""
        rank = int((self.logits > self.logits[token]).sum(dtype=torch.int32)) + 1
        return self._records(torch.tensor([token], device=self.logits.device), ranks=[rank])[0]

    def _records(self, ids: torch.Tensor, ranks) -> tuple[Candidate, ...]:
        columns = zip(ids.tolist(), ranks, self._probs[ids].tolist(), self._tempered[ids].tolist(),
                      self.sampled[0, ids].tolist())
        return tuple(Candidate(id=token, text=None if self._text is None else self._text(token), rank=rank,
                               prob=prob, prob_tempered=tempered_prob, prob_sampled=sampled)
                     for token, rank, prob, tempered_prob, sampled in columns)
