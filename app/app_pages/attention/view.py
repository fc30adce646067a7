"""What every part of the Attention page reads: the prompt, its trace, its tokens as shown, the head table.

The view is what the page's fragments are called with, and Streamlit keeps a fragment's arguments in its
session until the session is dropped, which is long after the visitor has left (a closed tab's session is
stored for server.disconnectedSessionTTL, and more sessions than that stay until a later one leaves). So the
view holds the trace weakly: the shared, byte-bounded store in app/cache.py decides how long a trace lives,
not the number of sessions that looked at it. A trace that store has dropped is fetched again (run again)
when a fragment asks for it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import pandas as pd

from app import cache
from app.figures import big_maps


@dataclass(frozen=True)
class AttentionView:
    source: str
    prompt: str
    bos: str
    loaded: object  # the LoadedModel, shared by every session (app/cache.get_model)
    plan: object  # the CapturePlan of a long prompt; None when every map is kept
    tokens: list[str]  # as the token strip shows them (split characters whole)
    table: pd.DataFrame  # one row per head, undefined metrics NaN
    n: int  # tokens traced
    n_layers: int  # the traced layers: a budget too small for every layer keeps the leading ones
    _traced: weakref.ref = field(repr=False, compare=False)

    @classmethod
    def of(cls, source: str, prompt: str, bos: str, loaded, traced, plan, tokens: list[str],
           table: pd.DataFrame) -> AttentionView:
        return cls(source, prompt, bos, loaded, plan, tokens, table, traced.n_tokens, len(traced.trace.layers),
                   weakref.ref(traced))

    @property
    def traced(self):
        """The PromptTrace: the one the shared store holds, or fetched again once it has dropped it."""
        traced = self._traced()
        if traced is None:
            traced, _ = cache.get_attention_trace(self.source, self.prompt, self.bos)
            object.__setattr__(self, "_traced", weakref.ref(traced))
        return traced

    @property
    def config(self):
        return self.loaded.config

    @property
    def big(self) -> bool:
        """Drawn pooled, with a full-resolution region beside it."""
        return self.n > big_maps.MAX_MAP_CELLS
