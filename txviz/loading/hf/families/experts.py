"""The config.json keys of Mixture-of-Experts families that their readers share: how many experts, how
many a token runs through, whether the chosen gates are renormalised, and (Qwen-MoE's) which layers keep
a dense FFN, read the way transformers reads them.

The family modules beside this one do not import txviz.loading.hf.config (it imports them, to register
them): the helpers they build on, the Llama fields among them, are handed to each reader as ``hf``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from txviz.loading.errors import ModelLoadError


def n_experts(hf: SimpleNamespace, raw: dict, default: int) -> int:
    """The routed experts: ``num_experts``, else ``num_local_experts`` (transformers 5 writes Qwen3-MoE's
    back under that name), else the class default."""
    key = next((k for k in ("num_experts", "num_local_experts") if raw.get(k) is not None), None)
    return default if key is None else hf.count(raw, key)


def routing(hf: SimpleNamespace, raw: dict, experts: int) -> dict[str, Any]:
    """top_k and router_norm of the softmax-then-top-k routers (Qwen-MoE, OLMoE): ``norm_topk_prob``
    renormalises the chosen probabilities."""
    top_k = hf.count(raw, "num_experts_per_tok")
    if top_k > experts:
        raise ModelLoadError(f"config.json: num_experts_per_tok={top_k} is more than the {experts} experts")
    return {"n_experts": experts, "top_k": top_k, "router_norm": "topk" if hf.flag(raw, "norm_topk_prob") else "all"}


def no_sliding_window(raw: dict) -> None:
    """Qwen-MoE's optional window on some layers is refused: none of the published MoE checkpoints uses it."""
    types = raw.get("layer_types") or []
    if raw.get("use_sliding_window") or any(t != "full_attention" for t in types):
        raise ModelLoadError("config.json: a sliding window (use_sliding_window, or sliding layer_types) on a "
                             "Qwen MoE model is not supported")


def dense_layers(hf: SimpleNamespace, raw: dict, n_layers: int) -> tuple[int, ...]:
    """Qwen-MoE's dense layers: those in ``mlp_only_layers``, and those whose number (from 1) is not a
    multiple of ``decoder_sparse_step`` (transformers' Qwen2MoeDecoderLayer)."""
    hf.bounded_layers(n_layers)  # before a list of that many entries is built
    step = hf.count(raw, "decoder_sparse_step")
    only = raw.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise ModelLoadError(f"config.json: mlp_only_layers must be a list of layer numbers, got {str(only)[:80]}")
    return tuple(i for i in range(n_layers) if i in only or (i + 1) % step)
