"""What a decoding run records at every step, asked for up front so each step computes only that.

A plain cached decode step runs the model on one token and draws from the sampler's distribution.
The record adds, per step: the ``candidates`` most probable tokens (a top-N of logits already
computed), the cache's bytes, and only where asked the logit lens (the final norm and unembedding
applied to every layer's residual: as many vocabulary-wide products as layers, the one expensive
part) and the attention row of the token fed in, on the layers and heads named (those layers take
the eager attention path for one query row; the others keep the fused kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

from txviz.model import InputError


@dataclass(frozen=True)
class StepRecordRequest:
    """``candidates``: how many of the most probable tokens each step keeps (0: none).
    ``lens``: read the chosen token's rank through the logit lens after every layer.
    ``lens_after_run``: read it for every step at once when the run ends (steps streamed before then
    carry none; the run's steps do): the steps keep a plain step's pace, the reading costs less in all.
    ``attention_layers`` / ``attention_heads``: whose attention row to keep (heads None: every head)."""

    candidates: int = 10
    lens: bool = False
    lens_after_run: bool = False
    attention_layers: tuple[int, ...] = ()
    attention_heads: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.candidates, bool) or not isinstance(self.candidates, int) or self.candidates < 0:
            raise InputError(f"candidates must be an integer >= 0, got {self.candidates!r}")
        object.__setattr__(self, "attention_layers", tuple(sorted(set(self.attention_layers))))
        if self.attention_heads is not None:
            object.__setattr__(self, "attention_heads", tuple(sorted(set(self.attention_heads))))
        if self.lens_after_run and not self.lens:
            raise InputError("lens_after_run reads the lens: ask for lens too")

    def check(self, config) -> None:
        """Raise an InputError naming any layer or head the model does not have."""
        bad_layers = [i for i in self.attention_layers if not 0 <= i < config.n_layers]
        if bad_layers:
            raise InputError(f"attention layers {bad_layers} out of range: the model has {config.n_layers} "
                             f"layers (0..{config.n_layers - 1})")
        bad_heads = [h for h in self.heads(config) if not 0 <= h < config.n_heads]
        if bad_heads:
            raise InputError(f"attention heads {bad_heads} out of range: the model has {config.n_heads} "
                             f"heads (0..{config.n_heads - 1})")

    def heads(self, config) -> tuple[int, ...]:
        return tuple(range(config.n_heads)) if self.attention_heads is None else self.attention_heads


PLAIN = StepRecordRequest(candidates=0)  # the record every step has anyway: token, rank, probabilities, bytes, time
