"""How much of each head's attention a learned sink takes (gpt-oss; txviz.model.sinks): the maps hold the
weights on the prompt's tokens, so what a row lacks from 1 is the sink's share."""

from __future__ import annotations

import numpy as np

from txviz.capture.trace import Trace


def sink_shares(tr: Trace) -> np.ndarray | None:
    """(L, H) each traced head's sink share averaged over the prompt's tokens, from the stored maps of the
    first sequence; None where the maps are not stored whole (a long prompt's plan)."""
    if "attn_probs" not in tr.data or not tr.maps.is_default:
        return None
    probs = tr["attn_probs"][:, 0].double()  # (L, H, T, S)
    return (1.0 - probs.sum(-1)).mean(-1).clamp(min=0.0).numpy()
