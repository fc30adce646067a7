"""Counterfactual KV sharing on a loaded model: what if it had more or fewer KV heads?

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

The original is never touched: variants are new Decoders built from cloned tensors (``merge_kv_heads``:
new modules only where its tensors change, sharing the rest; txviz.model.variant).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.model.kv_cache import KVCache
from txviz.model.transformer import Decoder
from txviz.model.variant import with_parameters


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


# ---- per layer: where is sharing cheap? -------------------------------------------------------------
def merge_kv_heads(model: Decoder, layers, n_kv_heads: int = 1) -> Decoder:
    """``model`` whose ``layers`` read K/V as if they had ``n_kv_heads`` KV heads (mean-pooled as in
    ``to_kv_groups``), stored back as copies so the config, and every other layer, stay as they are.
    A layer merged this way computes exactly what the same layer of ``to_kv_groups(model, n_kv_heads)``
    computes; a real per-layer design would also store only ``n_kv_heads`` heads there (see
    ``merged_kv_bytes_per_token``). Unmerged tensors are shared with ``model``, not copied (nothing here
    writes to them), so a variant costs only the merged projections and the few modules that hold them
    (txviz.model.variant)."""
    config = model.config
    old = config.n_kv_heads
    if n_kv_heads < 1 or old % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide the model's {old} KV heads")
    chosen = sorted(set(int(layer) for layer in layers))
    bad = [layer for layer in chosen if not 0 <= layer < config.n_layers]
    if bad:
        raise ValueError(f"layers {bad} out of range: the model has {config.n_layers} (0..{config.n_layers - 1})")
    prefixes = tuple(f"layers.{layer}.attn.{proj}." for layer in chosen for proj in ("k_proj", "v_proj"))
    merged = {}
    for name, tensor in model.named_parameters():
        if name.startswith(prefixes):
            pooled = _regroup(tensor.detach(), config.n_heads, old, n_kv_heads, config.head_dim)
            merged[name] = _regroup(pooled, config.n_heads, n_kv_heads, old, config.head_dim)  # copied back
    return with_parameters(model, merged)


def merged_kv_bytes_per_token(config: ModelConfig, merged_layers, n_kv_heads: int, element_bytes: int) -> int:
    """KV bytes per token of a design whose ``merged_layers`` keep ``n_kv_heads`` KV heads and the
    others keep the model's: 2 (K and V) × Σ over layers of heads × head_dim × bytes."""
    merged = len(set(merged_layers))
    heads = merged * n_kv_heads + (config.n_layers - merged) * config.n_kv_heads
    return 2 * heads * config.head_dim * element_bytes


@dataclass(frozen=True)
class LayerSharing:
    """How much merging each layer's KV heads alone costs, and the path that merges the cheapest first."""

    n_kv_heads: int
    layer_kl: list[float]  # mean KL(original ‖ merged) per layer, that layer merged alone
    layer_top1: list[float]  # top-1 agreement with the original, that layer merged alone
    order: list[int]  # layers from cheapest to dearest
    path_layers: list[int]  # how many of the cheapest layers are merged at each point of the path
    path_kl: list[float]
    path_top1: list[float]
    path_perplexity: list[float]
    path_kv_bytes_per_token: list[int]
    perplexity_original: float

    def to_dict(self) -> dict:
        return asdict(self)


def _log_probs(model: Decoder, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return F.log_softmax(model(ids)[:, :-1].float(), dim=-1)  # (B, T−1, V)


def _original_pass(model: Decoder, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The original's log-probs (as ``_log_probs``) and the residual entering each layer, (L+1, B, T, d),
    from one pass."""
    from txviz.capture.trace import trace

    tr = trace(model, ids, capture=("logits", "resid"))
    device = next(model.parameters()).device
    return F.log_softmax(tr["logits"].to(device)[:, :-1].float(), dim=-1), tr["resid"]


def _merged_log_probs(model: Decoder, layers: list[int], n_kv_heads: int, entering: torch.Tensor) -> torch.Tensor:
    """``_log_probs(merge_kv_heads(model, layers, n_kv_heads), ids)`` without the layers below the first
    merged one: they are the original's, so the variant resumes from the original's residual there
    (``entering``: the residual entering the first merged layer, (B, T, d)). The same numbers, a pass of
    only the layers from there on."""
    first = min(layers)
    variant = merge_kv_heads(model, layers, n_kv_heads)
    with torch.inference_mode():
        logits = variant.resume(entering.to(next(model.parameters()).device), first)
        return F.log_softmax(logits[:, :-1].float(), dim=-1)  # (B, T−1, V)


def _compare(logp_o: torch.Tensor, logp_v: torch.Tensor, ids: torch.Tensor) -> tuple[float, float, float]:
    """(mean KL(original ‖ variant), top-1 agreement, the variant's perplexity) on the same ids."""
    kl = (logp_o.exp() * (logp_o - logp_v)).sum(-1).mean()
    agree = (logp_o.argmax(-1) == logp_v.argmax(-1)).float().mean()
    nll = -logp_v.gather(-1, ids[:, 1:].to(logp_v.device)[..., None]).mean()
    return float(kl), float(agree), float(nll.exp())


def _path_counts(n_layers: int, path_points: int) -> list[int]:
    return sorted({round(i * n_layers / (max(path_points, 2) - 1)) for i in range(max(path_points, 2))})


def layer_sharing_steps(config: ModelConfig, path_points: int = 7) -> int:
    """How many steps ``layer_sharing`` takes (the count its ``progress`` reports): the original, one per
    layer, one per point of the path (the first point, nothing merged, needs no pass)."""
    return 1 + config.n_layers + len(_path_counts(config.n_layers, path_points))


def time_sweep_steps(model: Decoder, ids, n_kv_heads: int = 1) -> tuple[float, float]:
    """Seconds, measured here, of ``layer_sharing``'s longest and shortest steps: merging layer 0 (every
    layer runs, then the logits) and merging only the last layer (one layer runs, then the logits; timed
    from the embeddings' output, which has the shape of the residual entering it, so it does the same
    work). ``sweep_seconds`` turns the two into the sweep's estimate."""
    ids = model.check_ids(ids)
    start = time.perf_counter()
    _log_probs(merge_kv_heads(model, [0], n_kv_heads), ids)
    first = time.perf_counter() - start
    last_layer = model.config.n_layers - 1
    with torch.inference_mode():
        entering = model.embed(ids.to(next(model.parameters()).device))
    start = time.perf_counter()
    _merged_log_probs(model, [last_layer], n_kv_heads, entering)
    return first, time.perf_counter() - start


def sweep_seconds(config: ModelConfig, first_s: float, last_s: float, path_points: int = 7) -> float:
    """The sweep's time from its longest and shortest step (``time_sweep_steps``): the original's pass
    (a whole one), a step per layer that runs the layers from it on (linear between the two), and the
    path's points that merge something, each bounded by a whole pass (their first merged layer is known
    only once the layers are ranked; the point that merges nothing runs no pass)."""
    n = config.n_layers
    per_layer = [last_s + (first_s - last_s) * (n - 1 - i) / max(n - 1, 1) for i in range(n)]
    path_passes = sum(1 for count in _path_counts(n, path_points) if count)
    return first_s + sum(per_layer) + first_s * path_passes


def layer_sharing(model: Decoder, ids, n_kv_heads: int = 1, *, path_points: int = 7,
                  progress=None) -> LayerSharing:
    """Merge each layer's KV heads alone and measure the damage; then merge the cheapest 0, …, all
    layers (``path_points`` points, 0 and all included) and measure quality against KV bytes per token.
    ``progress(done, total)`` is told after each step (the original, each layer, each point). A variant
    runs only the layers from its first merged one, on the original's residual entering it: on
    SmolLM2 (30 layers) that is about half the layer work of full passes, with the same figures."""
    ids = model.check_ids(ids)
    if ids.shape[1] < 2:
        raise ValueError("need at least 2 tokens: quality is measured on each token's successor")
    config = model.config
    element = next(model.parameters()).element_size()
    counts = _path_counts(config.n_layers, path_points)
    total, done = layer_sharing_steps(config, path_points), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    logp_o, entering = _original_pass(model, ids)
    ppl_o = float((-logp_o.gather(-1, ids[:, 1:].to(logp_o.device)[..., None]).mean()).exp())
    tick()
    layer_kl, layer_top1 = [], []
    for layer in range(config.n_layers):
        kl, top1, _ = _compare(logp_o, _merged_log_probs(model, [layer], n_kv_heads, entering[layer]), ids)
        layer_kl.append(kl)
        layer_top1.append(top1)
        tick()
    order = sorted(range(config.n_layers), key=lambda layer: layer_kl[layer])
    path = {"layers": [], "kl": [], "top1": [], "ppl": [], "bytes": []}
    for count in counts:
        merged = order[:count]
        if count:
            kl, top1, ppl = _compare(logp_o, _merged_log_probs(model, merged, n_kv_heads, entering[min(merged)]), ids)
        else:
            kl, top1, ppl = 0.0, 1.0, ppl_o
        for key, value in zip(("layers", "kl", "top1", "ppl", "bytes"),
                              (count, kl, top1, ppl, merged_kv_bytes_per_token(config, merged, n_kv_heads, element))):
            path[key].append(value)
        tick()
    return LayerSharing(n_kv_heads=n_kv_heads, layer_kl=layer_kl, layer_top1=layer_top1, order=order,
                        path_layers=path["layers"], path_kl=path["kl"], path_top1=path["top1"],
                        path_perplexity=path["ppl"], path_kv_bytes_per_token=path["bytes"],
                        perplexity_original=ppl_o)
