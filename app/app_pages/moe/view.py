"""What every tab of the Mixture of Experts page reads: the loaded model, and the zoo variant shown
instead of it while it is dense (picked above the tabs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MoeView:
    source: str
    loaded: object  # LoadedModel
    variant: str | None  # the zoo's MoE shown instead of a dense loaded model; None: the loaded one is a MoE
