"""The KV cache page's counterfactuals on a shipped text: the loaded model with more or fewer KV
heads compared with the original, and the per-layer sharing sweep (timed one step first, then run
with a ``progress(done, total)`` callback). Each is checked against the budget before it runs, and runs
on one torch thread while the machine is oversubscribed (txviz.threads)."""

from __future__ import annotations

import torch

from app.services.prompts import check_passes
from txviz.threads import threads_for_this_run
from txviz import limits as limits_
from txviz.loading.loaded import LoadedModel


def check_kv_counterfactual(loaded: LoadedModel, n_kv_heads: int, n_tokens: int, settings: limits_.Limits) -> None:
    """PromptError unless the two passes of ``kv_counterfactual`` over ``n_tokens`` fit the budget."""
    heads = f"{n_kv_heads} KV head{'s' * (n_kv_heads != 1)}"
    check_passes(loaded, n_tokens, 2, f"comparing {n_tokens} tokens with {heads}", settings)


def kv_counterfactual(loaded: LoadedModel, n_kv_heads: int, ids: torch.Tensor):
    """The model with ``n_kv_heads`` KV heads (repeated for more, mean-pooled for fewer) compared with
    the original on ``ids`` (txviz.analysis.kv.sharing.quality_vs_original)."""
    from txviz.analysis.kv.sharing import quality_vs_original, to_kv_groups, to_mha

    config = loaded.config
    if n_kv_heads == config.n_kv_heads:
        variant = loaded.model  # the original itself: the reference row, nothing converted
    elif n_kv_heads == config.n_heads:
        variant = to_mha(loaded.model)
    else:
        variant = to_kv_groups(loaded.model, n_kv_heads)
    with threads_for_this_run():
        report = quality_vs_original(loaded.model, variant, ids)
    del variant  # the converted weights are not kept: only the numbers are
    return report


def layer_sharing_step_seconds(loaded: LoadedModel, n_kv_heads: int, ids: torch.Tensor,
                               settings: limits_.Limits) -> tuple[float, float]:
    """Seconds of the per-layer sweep's longest and shortest step here (merge layer 0 and run every
    layer; merge the last and run it alone), for ``txviz.analysis.kv.sharing.sweep_seconds``."""
    from txviz.analysis.kv.sharing import time_sweep_steps

    check_passes(loaded, ids.shape[0], 2, "timing two steps of the per-layer sweep", settings)
    with threads_for_this_run():  # the estimate is timed under the rule the sweep runs under
        return time_sweep_steps(loaded.model, ids, n_kv_heads)


def layer_sharing(loaded: LoadedModel, n_kv_heads: int, ids: torch.Tensor, settings: limits_.Limits, progress=None):
    """Each layer's KV heads merged alone, then the cheapest first (txviz.analysis.kv.sharing.layer_sharing):
    one forward pass per layer and per point, ``progress(done, total)`` told after each."""
    from txviz.analysis.kv.sharing import layer_sharing as sweep

    check_passes(loaded, ids.shape[0], loaded.config.n_layers + 8,
                 f"merging the KV heads of each of {loaded.config.n_layers} layers", settings)
    with threads_for_this_run():
        return sweep(loaded.model, ids, n_kv_heads, progress=progress)
