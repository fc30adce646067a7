"""Running many interventions in batched forward calls, scored by the logit difference.

Each variant is a list of replacements (txviz.causal.intervention); ``chunk_size`` variants share one
forward call, the prompt repeated along the batch. Effects are reported as the change of the logit
difference from the unedited run: for a head patched from the corrupt run into the clean one, how much
of the clean answer that head carries (the "noising" direction of Heimersheim & Nanda 2024).
"""

from __future__ import annotations

from typing import Sequence

import torch

from txviz.batches import batch_done
from txviz.causal.activations import Activations, run_with_activations
from txviz.causal.intervention import Intervention, Replace, Value
from txviz.causal.metric import logit_diff
from txviz.causal.shared_prefix import CleanRun, PrefixCache, clean_run, drop_no_ops, shared_positions, shifted
from txviz.model.kv_cache import NO_CACHE

# variants per forward call: the fastest measured on SmolLM2's 270-head sweep (16: 8.3 s, 64: 10.4 s, all 270:
# 16.0 s on one thread; 6.4 s and 7.2 s for 16 and 64 on two): more rows share less of the unedited prefix
DEFAULT_CHUNK = 16


def as_batch(ids: torch.Tensor) -> torch.Tensor:
    ids = torch.as_tensor(ids)
    return ids[None] if ids.dim() == 1 else ids


@torch.no_grad()
def run_variants(model, ids: torch.Tensor, variants: Sequence[Sequence[Replace]], answer_id: int, wrong_id: int,
                 *, source: Activations | None = None, chunk_size: int = DEFAULT_CHUNK,
                 clean: CleanRun | None = None) -> torch.Tensor:
    """(N,) logit difference of each variant run on the one prompt ``ids`` (T,) or (1, T).

    What no variant changes is the plain run's, computed once (txviz.causal.shared_prefix): a variant
    whose replacements all write the clean value gets the plain run's number without a call; each
    chunk of the others resumes at its earliest edited layer (``Decoder.resume``) on the positions
    from its first changed one, attending to the plain run's keys before it. Variants come layer-major
    from every caller here, so a chunk's rows share most of their unedited layers. ``clean``: that plain
    run (shared_prefix.clean_run of ``ids``, recording the source's points) when the caller has it."""
    ids = as_batch(ids)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    clean = clean if clean is not None else clean_run(model, ids, _points(source))
    missing = sorted(set(source or {}) - set(clean.activations))
    if missing:
        raise ValueError(f"the clean run given does not record the source's sites {missing[:3]}: "
                         "without them no variant could be found to leave the clean run unchanged")
    variants = drop_no_ops(variants, source, clean.activations)
    results = logit_diff(clean.logits, answer_id, wrong_id).float().cpu().repeat(len(variants))
    edited = [n for n, replaces in enumerate(variants) if replaces]
    for start in range(0, len(edited), chunk_size):
        rows = edited[start:start + chunk_size]
        logits = _resume_chunk(model, clean, [variants[n] for n in rows], source, ids.shape[-1])
        results[rows] = logit_diff(logits, answer_id, wrong_id).float().cpu()
        batch_done(start // chunk_size + 1, -(-len(edited) // chunk_size))
    return results


def _resume_chunk(model, clean: CleanRun, chunk: list[list[Replace]], source: Activations | None,
                  n_tokens: int) -> torch.Tensor:
    """The last logits of ``chunk``'s variants: from their first edited layer, on the positions
    after those they all leave unchanged (the plain run's keys and values stand in for those)."""
    layer = first_edited_layer(chunk, model.config.n_layers)
    n = shared_positions(chunk, source, clean.activations, n_tokens)
    moved, cut = shifted(chunk, source, n)
    residual = clean.entering[layer][:, n:].expand(len(chunk), -1, -1)
    cache = PrefixCache(clean.cache, n) if n else NO_CACHE  # positions n.. attend to the clean run's keys before n
    return model.resume(residual, layer, cache=cache, record=Intervention(moved, cut), last_only=True)


def _points(source: Activations | None) -> list[str]:
    return sorted({point for _, point in source or {}})


def unedited_diff(clean: CleanRun, answer_id: int, wrong_id: int) -> float:
    """The plain run's logit difference: what ``clean_diff`` gives for the same ids, without a call."""
    return float(logit_diff(clean.logits, answer_id, wrong_id)[0])


def first_edited_layer(variants: Sequence[Sequence[Replace]], n_layers: int) -> int:
    """The earliest layer any of ``variants`` edits (n_layers when none edits anything)."""
    return min((r.layer for replaces in variants for r in replaces), default=n_layers)


def check_same_length(clean_ids: torch.Tensor, corrupt_ids: torch.Tensor) -> None:
    n_clean, n_corrupt = as_batch(clean_ids).shape[-1], as_batch(corrupt_ids).shape[-1]
    if n_clean != n_corrupt:
        raise ValueError(f"the clean prompt has {n_clean} tokens and the corrupt one {n_corrupt}: patching "
                         "needs the same token length (change a word for one of the same token count)")


def head_variants(n_layers: int, n_heads: int, point: str = "head_out", value: Value = "source") -> list[list[Replace]]:
    """One variant per head (layer-major): that head's ``point`` replaced by ``value`` at every position."""
    return [[Replace(layer, point, head, value=value)] for layer in range(n_layers) for head in range(n_heads)]


def clean_diff(model, ids: torch.Tensor, answer_id: int, wrong_id: int) -> float:
    with torch.no_grad():
        return float(logit_diff(model(as_batch(ids), last_only=True), answer_id, wrong_id)[0])


def at_point(source: Activations, point: str) -> Activations:
    """The sites of ``source`` at one edit point (a run recorded for several steps holds more)."""
    return {site: tensor for site, tensor in source.items() if site[1] == point}


def patch_heads(model, clean_ids, corrupt_ids, answer_id: int, wrong_id: int, *, point: str = "head_out",
                chunk_size: int = DEFAULT_CHUNK, source: Activations | None = None,
                clean: CleanRun | None = None) -> torch.Tensor:
    """(L, H or Hkv): change of the clean logit difference when one head's ``point`` (head_out, q, k
    or v) is patched from the corrupt run, at every position. k and v have the KV heads' count.
    ``source`` (the corrupt run's activations at ``point``) and ``clean`` (the clean prompt's
    shared_prefix.clean_run, recording ``point``) are made here unless the caller already has them."""
    check_same_length(clean_ids, corrupt_ids)
    if source is None:
        source = run_with_activations(model, as_batch(corrupt_ids), (point,), last_only=True)[1]
    source = at_point(source, point)
    clean = clean if clean is not None else clean_run(model, as_batch(clean_ids), (point,))
    n_layers = model.config.n_layers
    n_heads = source[0, point].shape[1]
    diffs = run_variants(model, clean_ids, head_variants(n_layers, n_heads, point), answer_id, wrong_id,
                         source=source, chunk_size=chunk_size, clean=clean)
    return diffs.view(n_layers, n_heads) - unedited_diff(clean, answer_id, wrong_id)


def ablate_heads(model, ids, answer_id: int, wrong_id: int, *, value: Value = "mean",
                 source_ids: torch.Tensor | None = None, chunk_size: int = DEFAULT_CHUNK,
                 clean: CleanRun | None = None) -> torch.Tensor:
    """(L, H): change of the logit difference when one head's output is ablated (zero, mean over
    positions, or resampled from ``source_ids``, a prompt of the same token length). ``clean``: the
    plain run of ``ids`` (shared_prefix.clean_run; recording head_out for a resample) if the caller has it."""
    source = None
    if value == "source":
        if source_ids is None:
            raise ValueError("resample ablation needs source_ids: the prompt to resample from")
        check_same_length(ids, source_ids)
        source = run_with_activations(model, as_batch(source_ids), ("head_out",), last_only=True)[1]
    clean = clean if clean is not None else clean_run(model, as_batch(ids), _points(source))
    config = model.config
    diffs = run_variants(model, ids, head_variants(config.n_layers, config.n_heads, value=value), answer_id,
                         wrong_id, source=source, chunk_size=chunk_size, clean=clean)
    return diffs.view(config.n_layers, config.n_heads) - unedited_diff(clean, answer_id, wrong_id)
