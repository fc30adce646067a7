"""Today's attention ranking beside the causal one: each head's attention margin on the clean prompt,
from the pronoun's row to the answer candidate minus the best other candidate (txviz.analysis.coref.ranking's
scoring), for ``txviz patch --candidates``. It says where a head looks; the interventions say what it does.
"""

from __future__ import annotations

from typing import Sequence

import torch

from txviz.analysis.coref.ranking import score_heads, word_spans, word_token_spans
from txviz.capture.trace import trace


def _first_span(text: str, word: str, label: str) -> tuple[int, int]:
    spans = word_spans(text, word)
    if not spans:
        raise ValueError(f"the {label} {word!r} is not a whole word of the clean prompt")
    return spans[0]


def attention_margins(model, encoding, text: str, pronoun: str, candidates: Sequence[str],
                      answer: str) -> torch.Tensor:
    """(L, H): attention from the pronoun (its first occurrence) to the candidate that is ``answer``
    (compared without surrounding spaces) minus the best other candidate."""
    names = [c.strip() for c in candidates]
    if len(names) < 2 or not all(names):
        raise ValueError(f"--candidates needs at least two non-empty words separated by commas, got {candidates}")
    if answer.strip() not in names:
        raise ValueError(f"the answer {answer.strip()!r} is not among the candidates {names}")
    pronoun_chars = _first_span(text, pronoun.strip(), "pronoun")
    candidate_chars = [_first_span(text, name, "candidate") for name in names]
    row, spans = word_token_spans(list(encoding.offsets), getattr(encoding, "special", None),
                                  pronoun_chars, candidate_chars)
    probs = trace(model, torch.as_tensor(list(encoding.ids)), capture=("attn_probs",))["attn_probs"][:, 0]
    scores = score_heads(probs, row, spans, target=names.index(answer.strip()))
    grid = torch.zeros(model.config.n_layers, model.config.n_heads)
    for score in scores:
        grid[score.layer, score.head] = score.margin
    return grid
