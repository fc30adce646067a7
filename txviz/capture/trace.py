"""Per-call capture: ask for named internals, get an immutable Trace on the CPU.

    tr = trace(model, ids, capture=("attn_probs", "resid_norm"), layers=[0, 5])
    tr["attn_probs"]          # (n_layers_captured, B, H, T, S), layers in tr.layers order
    tr.attn(layer=5, head=3)  # (T, S) for the first sequence

At long contexts ask for the summaries instead of the maps: every head's metrics per query row,
computed block by block during the pass (txviz.capture.summaries), and q_rot/k_rot, from which any
head's map (or a band of its rows) is rebuilt exactly on demand (txviz.capture.maps):

    tr = trace(model, ids, capture=SUMMARY_CAPTURE)  # no T×T map is ever held
    tr.head_metrics()["induction"]                    # (L, H)
    tr.attn(layer=5, head=3)                          # rebuilt from q_rot, k_rot

Nothing is attached to the model: a Recorder (the interface of txviz.model.recording) lives for one
forward call and is handed down to the layers, which offer tensors to it; it keeps only what was
asked for, detached and on the CPU. So one model can serve many sessions and threads at once. Unknown names raise ``CaptureError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Iterable, Mapping

import torch

from txviz.capture.summaries import LayerSummaries, TokenPatterns, head_metrics
from txviz.capture.maps import AttentionRecipe, MapStorage, rebuild_attention
from txviz.model.recording import NULL_LAYER_RECORDER, NullLayerRecorder

LAYER_CAPTURES = {
    "q": "queries before RoPE (B, H, T, D)",
    "k": "keys before RoPE (B, Hkv, T, D)",
    "v": "values (B, Hkv, T, D)",
    "q_rot": "queries after RoPE (B, H, T, D)",
    "k_rot": "keys after RoPE (B, Hkv, T, D)",
    "attn_logits": "QKᵀ/√d before the mask (B, H, T, S)",
    "attn_scores": "pre-softmax scores with mask and ALiBi bias added (B, H, T, S)",
    "attn_probs": "attention probabilities (B, H, T, S); packed (B, H, T(T+1)/2) with lower-triangle storage",
    "attn_sink": "the share of each query row's attention a learned sink takes (B, H, T); the row's "
                 "attn_probs sum to 1 minus it (gpt-oss; models without sinks record none)",
    "head_summaries": "per-head metrics per query row (B, H, T, M), M = summaries.METRICS, NaN where "
                      "undefined; computed block by block, no T×S map kept",
    "kv_bytes": "bytes of K and V this layer keeps (scalar)",
    "attn_out": "attention sublayer output added to the residual (B, T, d)",
    "ffn_out": "FFN sublayer output added to the residual (B, T, d)",
    "router_logits": "MoE router logits (B, T, E)",
    "router_probs": "MoE router softmax over all experts (B, T, E)",
    "expert_ids": "MoE experts chosen per token (B, T, K)",
    "expert_gates": "MoE gate weights of the chosen experts (B, T, K)",
    "shared_expert_gate": "MoE shared expert's sigmoid gate, on every token outside the top-k (B, T)",
}
RESIDUAL_CAPTURES = {
    "resid": "residual stream after the embedding (index 0) and after each layer (B, T, d)",
    "resid_norm": "L2 norm of the residual stream per token, same indexing (B, T)",
}
GLOBAL_CAPTURES = {
    "positions": "positions of the tokens of this call (T,)",
    "rope_angles": "RoPE angles m·θ_i actually used (T, D/2)",
    "rope_cos": "RoPE cos actually multiplied into q and k (T, D)",
    "rope_sin": "RoPE sin actually multiplied into q and k (T, D)",
    "rope_local_angles": "RoPE angles m·θ_i of the sliding (local) layers where they have their own base "
                         "(Gemma 3: rope_local_theta 1e4 beside 1e6 on the global layers) (T, D/2)",
    "rope_local_cos": "RoPE cos multiplied into q and k on the sliding layers with their own base (T, D)",
    "rope_local_sin": "RoPE sin multiplied into q and k on the sliding layers with their own base (T, D)",
    "alibi_bias": "ALiBi bias added to the scores (H, T, S)",
    "logits": "output logits (B, T, V)",
}
CAPTURES = {**LAYER_CAPTURES, **RESIDUAL_CAPTURES, **GLOBAL_CAPTURES}
LOCAL_ROPE_CAPTURES = ("rope_local_angles", "rope_local_cos", "rope_local_sin")
# Everything a long-context trace needs: all heads' summaries, and any map rebuildable on demand.
SUMMARY_CAPTURE = ("head_summaries", "q_rot", "k_rot")


class CaptureError(ValueError):
    """A capture request naming something that cannot be captured."""


def _keep(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", copy=True)


class _Stack:
    """One capture stacked over layers (or residual points), each offered tensor copied straight into
    its slot on the CPU: no per-layer copies to stack at the end, which would hold every capture
    twice (q_rot and k_rot of 8192 tokens are 0.75 GB)."""

    def __init__(self, n: int):
        self.tensor: torch.Tensor | None = None
        self.filled = [False] * n

    def slot(self, index: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """Slot ``index``, to be filled in place a block at a time (the stack is made on first use)."""
        if self.tensor is None:
            self.tensor = torch.empty((len(self.filled), *shape), dtype=dtype, device="cpu")
        self.filled[index] = True
        return self.tensor[index]

    def put(self, index: int, tensor: torch.Tensor) -> None:
        if self.tensor is None:
            self.tensor = torch.empty((len(self.filled), *tensor.shape), dtype=tensor.dtype, device="cpu")
        slot = self.tensor[index]
        if not _is_view_of(tensor, slot):  # a tensor computed in its slot (LayerRecorder.place) is kept as it is
            slot.copy_(tensor.detach())  # from any device: each layer's capture leaves it at once
        self.filled[index] = True

    @property
    def complete(self) -> bool:
        return all(self.filled)


def _is_view_of(tensor: torch.Tensor, slot: torch.Tensor) -> bool:
    return (tensor.device == slot.device and tensor.data_ptr() == slot.data_ptr() and tensor.dtype == slot.dtype
            and tensor.shape == slot.shape and tensor.stride() == slot.stride())


class LayerRecorder:
    """The view of a Recorder that one layer sees: ``record(name, tensor)`` keeps it if wanted; the
    attention probabilities arrive a block of rows at a time (``map_rows``), each written straight into
    its stored form, so no layer ever holds its whole (B, H, T, S) maps beside what is kept."""

    map_blocks = True

    def __init__(self, stacks: dict[str, _Stack], slot: int, wanted: frozenset[str],
                 maps: MapStorage = MapStorage(), summaries: LayerSummaries | None = None,
                 packing: dict | None = None):
        self._stacks, self._slot, self._wanted, self._maps, self._summaries = stacks, slot, wanted, maps, summaries
        self._packing = {} if packing is None else packing  # the packing's indices, shared by every layer

    def wants(self, name: str) -> bool:
        return name in self._wanted

    @property
    def wanted(self) -> frozenset[str]:
        return self._wanted

    def __call__(self, name: str, tensor: torch.Tensor) -> None:
        if name in self._wanted:
            self._stacks[name].put(self._slot, self._maps.store(tensor) if name == "attn_probs" else tensor)

    def place(self, name: str, like: torch.Tensor) -> torch.Tensor | None:
        """Where to compute ``name`` (a tensor shaped and typed as ``like``) so that offering it keeps it
        without a copy: its slot, when it is wanted and would be kept as it is computed (on the CPU,
        without gradients); else None."""
        if name not in self._wanted or like.device.type != "cpu" or like.requires_grad:
            return None
        stack = self._stacks[name]
        if stack.tensor is not None and (stack.tensor.dtype != like.dtype or stack.tensor.shape[1:] != like.shape):
            return None
        return stack.slot(self._slot, tuple(like.shape), like.dtype)

    def map_rows(self, rows: slice, keys: slice, weights: torch.Tensor, shape: tuple[int, int]) -> None:
        """A block of query rows of this layer's attention weights (B, H, R, K), of maps (T, S)."""
        if "attn_probs" in self._wanted:
            stored = self._stacks["attn_probs"].slot(
                self._slot, self._maps.stored_shape(tuple(weights.shape[:2]), *shape), self._maps.dtype or weights.dtype)
            self._maps.write_rows(stored, rows, keys, weights.detach(), self._packing)

    def attention_rows(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        """A block of query rows of this layer's attention: probs and finite scores (B, H, R, K); the
        scores are used up (the layer drops them after this call)."""
        if self._summaries is not None:
            self._summaries.add(rows, keys, probs, scores)

    def many(self, **tensors: torch.Tensor) -> None:
        for name, tensor in tensors.items():
            self(name, tensor)

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor  # looks only: interventions are txviz.causal's


class Recorder:
    """Collects one forward call's captures. Create one per call; ``finish`` freezes it."""

    def __init__(self, capture: Iterable[str], layers: Iterable[int] | None, n_layers: int, *,
                 ids: torch.Tensor | None = None, maps: MapStorage = MapStorage(),
                 progress: Callable[[int, int], None] | None = None):
        names = frozenset(capture)
        unknown = names - set(CAPTURES)
        if unknown:
            raise CaptureError(f"unknown capture names {sorted(unknown)}; known: {sorted(CAPTURES)}")
        chosen = tuple(range(n_layers)) if layers is None else tuple(sorted(set(layers)))
        bad = [i for i in chosen if not 0 <= i < n_layers]
        if bad:
            raise CaptureError(f"layers {bad} out of range: the model has {n_layers} layers (0..{n_layers - 1})")
        if "head_summaries" in names and ids is None:
            raise CaptureError("head_summaries needs the token ids (duplicate/induction): pass ids=")
        self.names, self.layers, self.n_layers, self.maps = names, chosen, n_layers, maps
        self._layer_names = names & set(LAYER_CAPTURES)
        self._slots = {layer: slot for slot, layer in enumerate(chosen)}
        self._stacks = {name: _Stack(len(chosen)) for name in self._layer_names}
        patterns = TokenPatterns(ids.cpu()) if "head_summaries" in names else None
        self._summaries = {i: LayerSummaries(patterns) for i in chosen} if patterns is not None else {}
        self._residual = {name: _Stack(n_layers + 1) for name in names & set(RESIDUAL_CAPTURES)}
        self._globals: dict[str, torch.Tensor] = {}
        self._packing: dict = {}
        self._progress = progress

    def layer(self, index: int) -> LayerRecorder | NullLayerRecorder:
        if index not in self._slots or not self._layer_names:
            return NULL_LAYER_RECORDER
        return LayerRecorder(self._stacks, self._slots[index], self._layer_names, self.maps,
                             self._summaries.get(index), self._packing)

    def residual(self, index: int, x: torch.Tensor) -> None:
        """The residual stream after ``index`` layers (0: the embeddings); the Decoder offers it after
        every layer, which is also when ``progress(layers done, n_layers)`` is told."""
        if index > 0 and self._progress is not None:
            self._progress(index, self.n_layers)
        if "resid" in self._residual:
            self._residual["resid"].put(index, x)
        if "resid_norm" in self._residual:
            self._residual["resid_norm"].put(index, x.float().norm(dim=-1))

    def globals(self, ctx, positions) -> None:
        wanted = self.names & set(GLOBAL_CAPTURES)
        if "positions" in wanted:
            self._globals["positions"] = _keep(ctx.q_pos)
        if wanted & {"rope_angles", "rope_cos", "rope_sin"} and ctx.cos is not None:
            self._globals.update(rope_angles=_keep(positions.angles(ctx.q_pos)),
                                 rope_cos=_keep(ctx.cos), rope_sin=_keep(ctx.sin))
        if "alibi_bias" in wanted and ctx.alibi is not None:
            self._globals["alibi_bias"] = _keep(ctx.alibi)

    @property
    def wants_local_rope(self) -> bool:
        return bool(self.names & set(LOCAL_ROPE_CAPTURES))

    def local_rope(self, ctx, positions) -> None:
        """The RoPE tables of the sliding layers' own base: ``ctx`` is such a layer's AttentionContext.
        The Decoder offers only the global kind's tables (``globals``); ``trace`` asks for these."""
        if ctx.cos is not None:
            self._globals.update(rope_local_angles=_keep(positions.angles(ctx.q_pos)),
                                 rope_local_cos=_keep(ctx.cos), rope_local_sin=_keep(ctx.sin))

    def finish(self, ids: torch.Tensor, logits: torch.Tensor, recipe: AttentionRecipe | None = None) -> "Trace":
        for index, summaries in self._summaries.items():
            if summaries.rows is not None:
                self._stacks["head_summaries"].put(self._slots[index], summaries.rows)
        data: dict[str, object] = {}
        for name, stack in {**self._stacks, **self._residual}.items():
            if stack.tensor is not None and stack.complete:  # names some layers never offer are left out
                data[name] = stack.tensor
        data.update({k: v for k, v in self._globals.items() if k in self.names})
        if "logits" in self.names:  # the call's own output, made for this trace: no copy where it is on the CPU
            data["logits"] = logits.detach().cpu()
        rebuildable = recipe is not None and {"q_rot", "k_rot"} <= self.names
        return Trace(ids=_keep(ids), layers=self.layers, data=MappingProxyType(data), maps=self.maps,
                     recipe=recipe if rebuildable else None)


@dataclass(frozen=True)
class Trace:
    """What one call captured. Per-layer entries are stacked over ``layers``; residual entries over
    the L+1 points of the stream; globals as they were."""

    ids: torch.Tensor  # (B, T)
    layers: tuple[int, ...]
    data: Mapping[str, torch.Tensor]
    maps: MapStorage = MapStorage()  # how attn_probs is kept
    recipe: AttentionRecipe | None = None  # set when q_rot and k_rot were captured: maps are rebuildable

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self.data:
            if name not in CAPTURES:
                raise CaptureError(f"unknown capture {name!r}; known: {sorted(CAPTURES)}")
            raise CaptureError(f"{name!r} was not captured (or does not apply to this model); "
                               f"captured: {sorted(self.data)}")
        return self.data[name]

    def __contains__(self, name: str) -> bool:
        return name in self.data

    def layer_index(self, layer: int) -> int:
        if layer not in self.layers:
            raise CaptureError(f"layer {layer} was not captured; captured layers: {list(self.layers)}")
        return self.layers.index(layer)

    def get(self, name: str, layer: int) -> torch.Tensor:
        return self[name][self.layer_index(layer)]

    def attn(self, layer: int, head: int, batch: int = 0, rows: slice = slice(None)) -> torch.Tensor:
        """(T, S) attention probabilities of one head (or rows ``rows`` of them): the stored map when
        ``attn_probs`` was captured, else rebuilt from ``q_rot``/``k_rot``."""
        if "attn_probs" in self.data:
            stored = self.get("attn_probs", layer)[batch, head]
            return stored[rows] if self.maps.is_default else self.maps.rows(stored, self.n_tokens, rows)
        if self.recipe is not None:
            self.layer_index(layer)
            return rebuild_attention(self, layer, head, rows=rows, batch=batch)
        raise CaptureError("no attention maps in this trace: capture attn_probs, or q_rot and k_rot to "
                           f"rebuild them; captured: {sorted(self.data)}")

    def head_metrics(self, batch: int = 0) -> dict[str, torch.Tensor]:
        """Every head's metrics (L, H) from ``head_summaries``, as analysis.heads.head_metrics gives them
        from full maps."""
        return head_metrics(self["head_summaries"][:, batch])

    @property
    def n_tokens(self) -> int:
        return self.ids.shape[-1]


def trace(model, ids, capture: Iterable[str] = ("attn_probs",), *, layers: Iterable[int] | None = None,
          maps: MapStorage = MapStorage(), progress: Callable[[int, int], None] | None = None) -> Trace:
    """Run ``model`` once on ``ids`` and return what ``capture`` names. Logits are unchanged by it.
    ``maps`` says how ``attn_probs`` is kept (fp16, lower triangle); see txviz.capture.cost for what a
    request costs before running it. ``progress(done, n_layers)`` is called as each layer finishes
    (a long prompt takes a while)."""
    if isinstance(capture, str):
        capture = (capture,)
    capture = tuple(capture)
    with torch.inference_mode():
        ids = model.check_ids(ids)
        recorder = Recorder(capture, layers, model.config.n_layers, ids=ids, maps=maps, progress=progress)
        # Logits of every position are (T, vocab): at 8192 tokens 1.6 GB; compute them only if kept.
        logits = model(ids, record=recorder, last_only="logits" not in capture)
        if recorder.wants_local_rope:
            _record_local_rope(model, recorder, ids)
    recipe = AttentionRecipe.of(model, torch.arange(ids.shape[1])) if {"q_rot", "k_rot"} <= set(capture) else None
    return recorder.finish(ids, logits, recipe)


def local_rope_layer(model) -> int | None:
    """The first sliding layer whose RoPE differs from the global layers' (its own base, as Gemma 3's
    local layers), or None: then every layer rotates with the tables ``rope_angles`` records."""
    kinds = getattr(model, "kind_positions", ())
    for kind, positions in enumerate(kinds):
        if positions is not model.positions and model.kind_windows[kind] is not None:
            return model.kind_first_layer[kind]
    return None


def _record_local_rope(model, recorder: Recorder, ids: torch.Tensor) -> None:
    layer = local_rope_layer(model)
    if layer is None:
        return  # one RoPE for every layer (or none): nothing local to record
    q_pos = torch.arange(ids.shape[1], device=ids.device)  # a trace runs without a cache: positions 0..T-1
    ctx = model.layer_context(layer, q_pos, q_pos, model.embed.weight.dtype)
    recorder.local_rope(ctx, model.kind_positions[model.kind_of[layer]])
