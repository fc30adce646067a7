"""The record of one generated token: what the sampler chose between, what it chose, and what the
step cost (bytes of the KV cache, seconds), with the logit lens and attention rows where asked.

Step ``index`` puts its token at sequence ``position``. Its distribution came from running the token
before it (position − 1, the last prompt token at step 0) over the cache of every earlier token:
that query's attention row over positions 0..position − 1 is the one recorded (the last row of the
causal map at this step). ``prob`` is the softmax of the raw logits; ``prob_sampled`` the sampler's
distribution after temperature, top-k and top-p, renormalised (0 for a cut token, all the mass on
the argmax when greedy): the very tensor the token was drawn from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import torch

from txviz.decoding.lens import LensReading


@dataclass(frozen=True)
class Candidate:
    """One of the most probable tokens of a step (by raw logits; ``rank`` 1 is the most probable)."""

    id: int
    text: str | None  # None when no tokenizer was given
    rank: int
    prob: float  # softmax of the raw logits
    prob_tempered: float  # softmax of logits / temperature, before top-k and top-p (prob when greedy)
    prob_sampled: float  # what the token was drawn with: after temperature, top-k, top-p, renormalised


@dataclass(frozen=True)
class DecodingStep:
    index: int
    position: int
    token: Candidate  # the chosen token, whatever its rank
    candidates: tuple[Candidate, ...]  # the N most probable, largest first
    kept: int  # tokens the sampler could still draw (prob_sampled > 0): 1 when greedy
    forced: bool  # chosen by a branch rather than drawn
    tokens_computed: int  # tokens run through the model for this step (0: a branch's forced step)
    kv_bytes_per_layer: tuple[int, ...]  # the cache after this step's call: every token before ``position``
    seconds: float = field(compare=False)  # two records of the same step differ only in time
    lens: LensReading | None = None
    # layer → (heads asked, position) weights of the query at position − 1 over positions 0..position − 1
    attention: Mapping[int, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    @property
    def kv_bytes(self) -> int:
        return sum(self.kv_bytes_per_layer)

    @property
    def query_position(self) -> int:
        return self.position - 1
