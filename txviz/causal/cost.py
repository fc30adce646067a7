"""What a causal run costs before it runs: the token-layers (one layer computing one position of one
row) of its forward calls, counted as they will run.

An exact sweep (txviz.causal.patching.run_variants) runs each chunk of variants from its earliest edited
layer on the positions from its first changed one (txviz.causal.shared_prefix), and runs nothing for a
variant that writes only clean values. Which positions a patch from the counterfactual changes follows
from the tokens: every position from the first token where the prompts differ (a causal model's
activations before it are the clean run's), and at the embedding (``resid_pre`` of layer 0) only the
tokens that differ. So the count is known from the two prompts' ids, with no forward pass; it is exact
unless an activation after the first difference happens to equal the clean one, when the sweep runs
less than counted. A mean ablation changes every position, so its chunks run every position.
"""

from __future__ import annotations

from typing import Sequence

import torch

from txviz.causal.patching import DEFAULT_CHUNK

# Full forward passes of one prompt that each step makes besides its sweep when run alone: direct logit
# attribution 1; patching every head: the counterfactual's activations and the clean run the sweep resumes
# from, whose logits give the clean logit difference (2); ablating every head: the clean run (1); the
# attention margins 1; attribution patching: two forwards and one backward, which costs about one forward
# (assets/BENCHMARKS.md, interventions: forward + backward 2.0× a forward), so 3; the residual grid 2 as
# for patching; the counterfactual's logit difference 1.
STEP_PASSES = {"dla": 1, "patching": 2, "ablation": 1, "margins": 1, "attribution": 3, "grid": 2, "corrupt_diff": 1}
# measure_pair makes the clean run and the counterfactual's once for every step (txviz.causal.pair_runs):
# those 2, then direct logit attribution 1, the margins 1, and attribution patching's forward with
# gradients and its backward (2); the sweeps and the counterfactual's difference need no pass of their own.
PAIR_PASSES = {"shared": 2, "dla": 1, "margins": 1, "attribution": 2}


def first_difference(clean_ids: Sequence[int], corrupt_ids: Sequence[int]) -> int:
    """The first position where the two prompts' tokens differ (their length when they do not)."""
    clean, corrupt = torch.as_tensor(list(clean_ids)), torch.as_tensor(list(corrupt_ids))
    differs = (clean != corrupt).nonzero()
    return int(differs[0, 0]) if len(differs) else len(clean)


def chunked_token_layers(variants: Sequence[tuple[int, int]], n_layers: int, n_tokens: int,
                         chunk_size: int = DEFAULT_CHUNK) -> int:
    """Token-layers of the edited ``variants``, each given as (first edited layer, first changed position),
    in run order, when run ``chunk_size`` at a time from each chunk's earliest layer and position (the
    last position is always run: it is scored)."""
    total = 0
    for start in range(0, len(variants), chunk_size):
        chunk = variants[start:start + chunk_size]
        layer, position = min(layer for layer, _ in chunk), min(min(p for _, p in chunk), n_tokens - 1)
        total += len(chunk) * (n_layers - layer) * (n_tokens - position)
    return total


def head_sweep(n_layers: int, n_heads: int, n_tokens: int, first: int, chunk_size: int = DEFAULT_CHUNK) -> int:
    """Every head patched from the counterfactual (txviz.causal.patching.patch_heads): ``first`` is the first
    position where the prompts differ (0 for a mean ablation, which changes every position)."""
    if first >= n_tokens:
        return 0  # the same prompt: every patch writes clean values
    variants = [(layer, first) for layer in range(n_layers) for _ in range(n_heads)]
    return chunked_token_layers(variants, n_layers, n_tokens, chunk_size)


def grid_sweep(n_layers: int, clean_ids: Sequence[int], corrupt_ids: Sequence[int],
               chunk_size: int = DEFAULT_CHUNK) -> int:
    """The residual grid (txviz.causal.residual): one variant per (layer, position), of which run those that
    change something: at layer 0 (the embeddings) the tokens that differ, at later layers every position
    from the first difference."""
    clean, corrupt = list(clean_ids), list(corrupt_ids)
    first, n_tokens = first_difference(clean, corrupt), len(clean)
    variants = [(layer, t) for layer in range(n_layers) for t in range(n_tokens)
                if (clean[t] != corrupt[t] if layer == 0 else t >= first)]
    return chunked_token_layers(variants, n_layers, n_tokens, chunk_size)


def pair_passes(n_layers: int, n_heads: int, clean_ids: Sequence[int], corrupt_ids: Sequence[int], *,
                grid: bool, attribution: bool = True, margins: bool = True,
                chunk_size: int = DEFAULT_CHUNK) -> float:
    """measure_pair's work on this pair in full forward passes of one prompt (n_layers × n_tokens token-layers)."""
    n_tokens = len(list(clean_ids))
    first = first_difference(clean_ids, corrupt_ids)
    sweeps = (head_sweep(n_layers, n_heads, n_tokens, first, chunk_size) + head_sweep(n_layers, n_heads, n_tokens, 0, chunk_size)
              + (grid_sweep(n_layers, clean_ids, corrupt_ids, chunk_size) if grid else 0))
    steps = ["shared", "dla"] + ["attribution"] * attribution + ["margins"] * margins
    return sweeps / (n_layers * n_tokens) + sum(PAIR_PASSES[step] for step in steps)


def pair_estimate(config, clean_ids: Sequence[int], corrupt_ids: Sequence[int], *, element_bytes: int = 4,
                  gflops: float, grid: bool = True, attribution: bool = True, margins: bool = True,
                  chunk_size: int = DEFAULT_CHUNK):
    """What measure_pair takes on this pair, as a txviz.limits.Estimate: its work (``pair_passes``) in
    forward passes of one prompt, and the larger of a chunk of ``chunk_size`` rows held at once (each
    keeping its logits) and the attention margins' one trace keeping every map. The app's causal run and
    ``txviz patch`` check this one estimate against the same budget."""
    from txviz import limits

    n_tokens = max(len(list(clean_ids)), 1)
    one = limits.trace_estimate(config, n_tokens, ("logits",), element_bytes=element_bytes, gflops=gflops)
    held = one.bytes * chunk_size
    if margins:
        held = max(held, limits.trace_estimate(config, n_tokens, ("attn_probs",), element_bytes=element_bytes,
                                               gflops=gflops).bytes)
    passes = pair_passes(config.n_layers, config.n_heads, clean_ids, corrupt_ids, grid=grid, attribution=attribution,
                         margins=margins, chunk_size=chunk_size)
    what = (f"the work of {passes:,.0f} forward passes of {n_tokens} tokens (variants batched {chunk_size} at a "
            "time, each from the first layer and token it changes)")
    return limits.Estimate(what, int(held), one.seconds * passes)
