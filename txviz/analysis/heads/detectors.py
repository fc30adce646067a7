"""Head detectors (Olsson et al. 2022; TransformerLens ``detect_head``): the attention mass each head
puts on a pattern, as a layers × heads grid.

Previous-token, duplicate-token and first-token sink are measured on the user's prompt. Induction is
measured where it is unambiguous: a random token sequence repeated twice, where in the second copy
an induction head attends to the token right after the previous occurrence of the current token.
A user-defined pattern is any (T, T) boolean mask, e.g. "k tokens back" or "tokens that read X".
"""

from __future__ import annotations

import torch

from txviz.analysis.heads.metrics import pattern_score
from txviz.capture.trace import trace


def unknown_token_ids(tokenizer) -> tuple[int, ...]:
    """The id of the vocabulary's unknown token (a word-level vocabulary's ``<|unk|>``), or () for a
    tokenizer without one (a byte-level BPE spells anything): the ``ignore`` of the duplicate-token and
    induction patterns (txviz.analysis.heads.metrics), since two unknowns are usually two different words."""
    backend = getattr(tokenizer, "backend", None)
    token = getattr(getattr(backend, "model", None), "unk_token", None)
    unknown = backend.token_to_id(token) if token else None
    return () if unknown is None else (int(unknown),)


def repeated_random_tokens(vocab_size: int, length: int, *, seed: int = 0, prefix: tuple[int, ...] = (),
                           avoid: tuple[int, ...] = ()) -> torch.Tensor:
    """``prefix`` + r + r with r ``length`` random ids (no repeats inside r, none from ``avoid``)."""
    generator = torch.Generator().manual_seed(seed)
    keep = torch.ones(vocab_size, dtype=torch.bool)
    keep[[i for i in avoid if 0 <= i < vocab_size]] = False
    candidates = keep.nonzero()[:, 0]  # ascending ids, as before
    r = candidates[torch.randperm(len(candidates), generator=generator)[:length]]
    return torch.cat([torch.tensor(prefix, dtype=torch.long), r, r])


def induction_scores(model, length: int = 50, *, seed: int = 0, prefix: tuple[int, ...] = (),
                     avoid: tuple[int, ...] = ()) -> torch.Tensor:
    """(L, H): mean attention from each second-copy token to the token after its first occurrence."""
    ids = repeated_random_tokens(model.config.vocab_size, length, seed=seed, prefix=prefix, avoid=avoid)
    probs = trace(model, ids, ("attn_probs",))["attn_probs"][:, 0]  # (L, H, T, T)
    start = len(prefix)
    t = len(ids)
    pattern = torch.zeros(t, t, dtype=torch.bool)
    for i in range(start + length, t):  # second copy: token i repeats token i - length
        pattern[i, i - length + 1] = True
    return pattern_score(probs, pattern)


def offset_pattern(t: int, offset: int) -> torch.Tensor:
    """(T, T): query i attends to key i − offset (offset 0 = itself)."""
    return torch.ones(t, t, dtype=torch.bool).tril(-offset) & ~torch.ones(t, t, dtype=torch.bool).tril(-offset - 1)


def token_pattern(tokens: list[str], text: str) -> torch.Tensor:
    """(T, T): query i attends to earlier-or-same keys whose token (stripped) equals ``text``."""
    hits = torch.tensor([tok.strip() == text.strip() for tok in tokens])
    t = len(tokens)
    return hits[None, :].expand(t, t) & torch.ones(t, t, dtype=torch.bool).tril()


def pattern_scores(probs: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """probs (L, H, T, T) → (L, H) mass on ``pattern`` (rows where the pattern is empty are skipped)."""
    return pattern_score(probs, pattern)
