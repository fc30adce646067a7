"""What every part of the Attention page reads: the prompt, its trace, its tokens as shown, the head table."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from app.figures import big_maps


@dataclass(frozen=True)
class AttentionView:
    source: str
    prompt: str
    bos: str
    loaded: object  # the LoadedModel
    traced: object  # the PromptTrace
    plan: object  # the CapturePlan of a long prompt; None when every map is kept
    tokens: list[str]  # as the token strip shows them (split characters whole)
    table: pd.DataFrame  # one row per head, undefined metrics NaN

    @property
    def config(self):
        return self.loaded.config

    @property
    def n(self) -> int:
        return self.traced.n_tokens

    @property
    def n_layers(self) -> int:
        """The traced layers: a budget too small for every layer keeps the leading ones."""
        return len(self.traced.trace.layers)

    @property
    def big(self) -> bool:
        """Drawn pooled, with a full-resolution region beside it."""
        return self.n > big_maps.MAX_MAP_CELLS
