"""A prompt's trace as JSON for download: tokens with offsets, the per-head table, and chosen maps."""

from __future__ import annotations

import json

import torch


def trace_json(*, model: str, prompt: str, bos: str, ids, tokens, offsets, head_rows: list[dict],
               maps: dict[tuple[int, int], torch.Tensor]) -> str:
    """``maps`` maps (layer, head) to a (T, T) attention map; values are rounded to 6 decimals."""
    document = {
        "model": model, "prompt": prompt, "bos": bos,
        "tokens": [{"index": i, "id": int(t), "text": s, "start": a, "end": b}
                   for i, (t, s, (a, b)) in enumerate(zip(ids, tokens, offsets))],
        "heads": head_rows,
        "attention": [{"layer": layer, "head": head,
                       "weights": [[round(float(w), 6) for w in row] for row in weights.tolist()]}
                      for (layer, head), weights in maps.items()],
    }
    return json.dumps(document)
