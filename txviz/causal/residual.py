"""Where in the sentence the answer forms: patching the residual stream per (layer, position).

Row l, column t: the clean run with the residual stream entering layer l (``resid_pre``; layer 0 reads
the embeddings) at position t replaced by the corrupt run's; the value is the change of the logit
difference. The standard first picture of activation patching (Meng et al. 2022's causal tracing;
Heimersheim & Nanda 2024): the information moves from the deciding word's column in early layers to
the last position in late ones. A cell whose corrupt residual equals the clean one (every position before
the first changed token; at layer 0, every unchanged token) is exactly 0 and costs no forward pass
(txviz.causal.shared_prefix).
"""

from __future__ import annotations

import torch

from txviz.causal.activations import Activations, run_with_activations
from txviz.causal.intervention import Replace
from txviz.causal.patching import (DEFAULT_CHUNK, as_batch, at_point, check_same_length, run_variants,
                                   unedited_diff)
from txviz.causal.shared_prefix import CleanRun, clean_run


def residual_grid(model, clean_ids, corrupt_ids, answer_id: int, wrong_id: int, *,
                  chunk_size: int = DEFAULT_CHUNK, source: Activations | None = None,
                  clean: CleanRun | None = None) -> torch.Tensor:
    """(L, T): change of the clean logit difference when resid_pre[layer, position] comes from the corrupt run.
    ``source`` (the corrupt run's resid_pre) and ``clean`` (the clean prompt's shared_prefix.clean_run,
    recording resid_pre) are made here unless the caller already has them."""
    check_same_length(clean_ids, corrupt_ids)
    if source is None:
        source = run_with_activations(model, as_batch(corrupt_ids), ("resid_pre",), last_only=True)[1]
    source = at_point(source, "resid_pre")
    clean = clean if clean is not None else clean_run(model, as_batch(clean_ids), ("resid_pre",))
    n_layers, n_tokens = model.config.n_layers, as_batch(clean_ids).shape[-1]
    variants = [[Replace(layer, "resid_pre", position=t)] for layer in range(n_layers) for t in range(n_tokens)]
    diffs = run_variants(model, clean_ids, variants, answer_id, wrong_id, source=source, chunk_size=chunk_size,
                         clean=clean)
    return diffs.view(n_layers, n_tokens) - unedited_diff(clean, answer_id, wrong_id)
