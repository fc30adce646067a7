"""Counterfactual KV sharing on a loaded model (seed §4.1): what if it had more or fewer KV heads?

``to_mha`` gives every query head its own copy of its group's K/V projection: the same function,
logits unchanged, a cache n_heads/n_kv_heads times larger. ``to_kv_groups`` regroups the heads the way
Ainslie et al. (2023) convert an MHA checkpoint to GQA before uptraining: each new KV head's key and
value projections (and biases) are the mean of those of the query heads it will serve. Query head h
reads old KV head h // (H/Hkv_old) (llama's ``repeat_kv``), so the new head j is the mean, over query
heads h in j·g … j·g+g−1 (g = H/Hkv_new), of old head h's projection. When the groups nest that is
plain: fewer heads (Hkv_new divides Hkv_old) average whole old heads, more heads (Hkv_old divides
Hkv_new) copy them exactly. When they do not nest (e.g. 12 query heads, 4 → 6 KV heads) a new group
straddles two old ones and its head is their mean weighted by how many of its query heads each
served. Without uptraining the merged model is worse: ``quality_vs_original`` measures by how much.

The original is never touched: variants are new Decoders built from cloned tensors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.model.kv_cache import KVCache
from txviz.model.transformer import Decoder


def kv_head_options(config: ModelConfig) -> dict[int, str]:
    """Every n_kv_heads the conversion accepts (the divisors of n_heads) and what it does to the heads."""
    return {n: describe_regrouping(config.n_kv_heads, n) for n in range(1, config.n_heads + 1)
            if config.n_heads % n == 0}


def describe_regrouping(old: int, new: int) -> str:
    if new == old:
        return "unchanged"
    if old % new == 0:
        return f"merge: each new KV head is the mean of {old // new} old ones"
    if new % old == 0:
        return f"repeat: each old KV head is copied into {new // old} (exact)"
    return "straddle: some new groups span two old ones and take their weighted mean"


def _regroup(tensor: torch.Tensor, n_heads: int, old: int, new: int, head_dim: int) -> torch.Tensor:
    """k/v projection weight (Hkv_old·D, d) or bias (Hkv_old·D,) → the same for Hkv_new heads."""
    rest = tensor.shape[1:]
    per_head = tensor.double().reshape(old, head_dim, *rest)  # (Hkv_old, D, …)
    per_query = per_head.repeat_interleave(n_heads // old, dim=0)  # (H, D, …): the K/V each query head reads
    grouped = per_query.reshape(new, n_heads // new, head_dim, *rest).mean(dim=1)  # (Hkv_new, D, …)
    return grouped.reshape(new * head_dim, *rest).to(tensor.dtype)


def to_kv_groups(model: Decoder, n_kv_heads: int) -> Decoder:
    """A new Decoder with ``n_kv_heads`` KV heads, K/V projections mean-pooled (or repeated) from
    ``model``'s; every other tensor is a clone. Raises ValueError unless n_kv_heads divides n_heads."""
    config = model.config
    options = kv_head_options(config)
    if n_kv_heads not in options:
        raise ValueError(f"n_kv_heads={n_kv_heads} does not divide n_heads={config.n_heads}, so the "
                         f"query heads cannot be split into equal groups; choose from {sorted(options)}")
    new_config = config.replace(n_kv_heads=n_kv_heads, name=f"{config.name} with {n_kv_heads} KV heads "
                                f"({describe_regrouping(config.n_kv_heads, n_kv_heads).split(':')[0]})")
    state = {}
    for name, tensor in model.state_dict().items():
        if name.endswith(("attn.k_proj.weight", "attn.k_proj.bias", "attn.v_proj.weight", "attn.v_proj.bias")):
            state[name] = _regroup(tensor.detach(), config.n_heads, config.n_kv_heads, n_kv_heads, config.head_dim)
        else:
            state[name] = tensor.detach().clone()  # from_state_dict adopts tensors: never share the original's
    first = next(model.parameters())
    return Decoder.from_state_dict(new_config, state, device=first.device, dtype=first.dtype)


def to_mha(model: Decoder) -> Decoder:
    """The same model with one KV head per query head: each group's K/V copied to all its heads."""
    return to_kv_groups(model, model.config.n_heads)


@dataclass(frozen=True)
class QualityReport:
    """Next-token quality of a variant against the original on the same ids (positions 0…T−2, which
    have a next token). KL is in nats; the cache bytes are those of real KVCaches filled with ids."""

    n_predictions: int
    perplexity_original: float
    perplexity_variant: float
    top1_agreement: float  # fraction of positions where both pick the same next token
    mean_kl: float  # mean over positions of KL(original ‖ variant)
    kl_per_position: list[float]
    kv_bytes_original: int
    kv_bytes_variant: int

    def to_dict(self) -> dict:
        return asdict(self)


def _logits_and_cache_bytes(model: Decoder, ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    first = next(model.parameters())
    cache = KVCache(model.config, max_tokens=ids.shape[1], batch=ids.shape[0], dtype=first.dtype,
                    device=first.device)
    with torch.inference_mode():
        logits = model(ids, cache=cache)  # (B, T, V)
    return logits.float(), cache.nbytes


def quality_vs_original(original: Decoder, variant: Decoder, ids) -> QualityReport:
    """Perplexity of each on ``ids`` (T,) or (B, T), top-1 agreement and KL(original ‖ variant)."""
    ids = original.check_ids(ids)
    if ids.shape[1] < 2:
        raise ValueError("need at least 2 tokens: perplexity scores each token's successor")
    logits_o, bytes_o = _logits_and_cache_bytes(original, ids)
    logits_v, bytes_v = _logits_and_cache_bytes(variant, ids)
    logp_o = F.log_softmax(logits_o[:, :-1], dim=-1)  # (B, T−1, V): predictions that have a target
    logp_v = F.log_softmax(logits_v[:, :-1], dim=-1)
    targets = ids[:, 1:].to(logp_o.device)[..., None]  # (B, T−1, 1)
    nll_o = -logp_o.gather(-1, targets).mean()
    nll_v = -logp_v.gather(-1, targets).mean()
    kl = (logp_o.exp() * (logp_o - logp_v)).sum(-1).flatten()  # (B·(T−1),)
    agree = (logp_o.argmax(-1) == logp_v.argmax(-1)).float().mean()
    return QualityReport(n_predictions=kl.numel(), perplexity_original=float(nll_o.exp()),
                         perplexity_variant=float(nll_v.exp()), top1_agreement=float(agree),
                         mean_kl=float(kl.mean()), kl_per_position=kl.tolist(),
                         kv_bytes_original=bytes_o, kv_bytes_variant=bytes_v)
