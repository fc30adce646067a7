"""Why a head looks where it looks: its pre-softmax score split into (query-side node, key-side node) pairs.

Head h of layer L scores key j from query i as s·(R_i q_i)·(R_j k_j): q_i = QKnorm(W_Q,h · Norm(x_i)) (+
biases), k_j the same with the head's KV rows, x the residual stream entering the layer, R_i RoPE's
rotation at position i and s the query scale. Where the QK-norm spans all heads (OLMo 2, OLMoE), q_i
is head h's rows of QKnorm(W_Q · Norm(x_i)), every head's rows normed together (k_j the same over the
KV heads), as in the graph run. The residual stream is the sum of the outputs of every node before the
layer (txviz.circuit.graph), and with the two norms' scales frozen at this run's own values
(txviz.circuit.frozen; an across-heads QK-norm's scale is that of the whole projection) every step is
linear in it, so

    score(i, j) = Σ_{u, u'} s·(R_i Q_u)·(R_j K_u')

with Q_u node u's part of the query and K_u' node u''s part of the key (a "bias" part collects the
projections' and LayerNorm's biases). RoPE is a fixed rotation per position, so it is applied to each
part. The pairs add up to the model's own score exactly (the frozen scales are the run's scales); what
freezing approximates is the meaning of one pair: it is the pair's share at this run's scales, not what
removing a node would change, since removing it would change the norms' scales too. Measured on the
trophy sentence (query "it", key "trophy", a spread of heads, each head's two largest query-side nodes):
the frozen share missed the exact effect of removing the node by a median 15% on SmolLM2 and 40% on
Gemma 3 270M, by many times where a node's exact effect is small. A soft-capped model
(Gemma 2) caps the score after this sum: ``score`` is the sum, ``capped_score`` the model's capped number;
ALiBi's bias and the mask come after both. The scores of the top pairs say which upstream heads built the
query and the key that meet (Elhage et al. 2021's Q- and K-composition, read off one attention edge).

The value side: head h's output at i is Σ_j p_ij · W_O,h v_j. Node u's part of v_j (frozen norm, as
above) contributes p_ij · W_O,h V_u; ``value_parts`` gives its component along the head's whole output
at i, so the parts add up to key j's share of the length of that output: which nodes the head copies
from j, and how much of what it writes comes from them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from txviz.circuit.frozen import frozen_shares
from txviz.circuit.graph import CircuitGraph
from txviz.circuit.pair import as_ids
from txviz.circuit.runner import run_graph
from txviz.model.positions import apply_rotary
from txviz.model.recording import NullLayerRecorder, NullRecorder
from txviz.model.sinks import head_weights


@dataclass(frozen=True)
class QKBreakdown:
    layer: int
    head: int
    query: int
    key: int
    score: float  # the model's s·q·k after RoPE, before any soft-cap and the mask
    capped_score: float | None  # after the soft-cap, where the model has one
    weight: float  # the attention probability p_ij of the run
    query_nodes: tuple[str, ...]
    key_nodes: tuple[str, ...]
    pairs: torch.Tensor  # (query nodes, key nodes)
    value_nodes: tuple[str, ...]
    value_parts: torch.Tensor  # (value nodes,)

    @property
    def sum(self) -> float:
        return float(self.pairs.sum())

    def top_pairs(self, k: int = 10) -> list[dict]:
        """The k pairs of largest |value|, largest first."""
        flat = self.pairs.flatten()
        order = flat.abs().argsort(descending=True, stable=True)[:k]
        n_keys = self.pairs.shape[1]
        return [{"query_node": self.query_nodes[int(i) // n_keys], "key_node": self.key_nodes[int(i) % n_keys],
                 "value": float(flat[i])} for i in order]

    def top_values(self, k: int = 10) -> list[dict]:
        order = self.value_parts.abs().argsort(descending=True, stable=True)[:k]
        return [{"node": self.value_nodes[int(i)], "value": float(self.value_parts[i])} for i in order]


class _LayerKeeper(NullLayerRecorder):
    def __init__(self, kept: dict):
        self.kept = kept

    def many(self, **tensors: torch.Tensor) -> None:
        self.kept.update({name: tensors[name].detach() for name in ("q_rot", "k_rot", "v") if name in tensors})


class _OneLayer(NullRecorder):
    """Keeps one layer's rotated queries and keys and its values during a plain call."""

    def __init__(self, layer: int):
        self.index, self.kept = layer, {}

    def layer(self, index: int):
        return _LayerKeeper(self.kept) if index == self.index else super().layer(index)


def _parts(layer, proj, rows: slice, parts: torch.Tensor) -> torch.Tensor:
    """parts (n, d) of the residual at one position → (n + 1, D): each part through the frozen
    pre-attention norm and the head's rows of ``proj``, the biases as a last part."""
    normed, norm_bias = frozen_shares(layer.attn_norm, parts)
    weight = proj.weight[rows]  # (D, d)
    bias = torch.zeros(weight.shape[0], dtype=parts.dtype)
    if norm_bias is not None:
        bias = bias + norm_bias @ weight.T
    if proj.bias is not None:
        bias = bias + proj.bias[rows]
    return torch.cat([normed @ weight.T, bias[None]])


def _qk_normed(norm, parts: torch.Tensor) -> torch.Tensor:
    """parts (n + 1, D), the biases last, through the frozen QK-norm; a LayerNorm's bias (Phi's) joins the
    biases' part, so the parts still sum to the normed query or key."""
    shares, bias = frozen_shares(norm, parts)
    return shares if bias is None else torch.cat([shares[:-1], shares[-1:] + bias])


def _head_parts(layer, proj, norm, rows: slice, parts: torch.Tensor, across_heads: bool) -> torch.Tensor:
    """parts (n, d) → (n + 1, D): the head's query (or key) parts after the frozen QK-norm. The parts go
    through the rows the norm reads together (the head's own, or every head's where the norm spans all
    heads, its scale then from the whole projection) and the head keeps its own rows of the result."""
    read = slice(None) if across_heads else rows
    kept = rows if across_heads else slice(None)
    return _qk_normed(norm, _parts(layer, proj, read, parts))[:, kept]


def _rotated(ctx, x: torch.Tensor, position: int) -> torch.Tensor:
    return x if ctx.cos is None else apply_rotary(x, ctx.cos[position:position + 1], ctx.sin[position:position + 1])


@torch.no_grad()
def qk_attribution(model, ids, layer: int, head: int, query: int, key: int, *,
                   outputs: torch.Tensor | None = None) -> QKBreakdown:
    """The breakdown of head ``head`` of ``layer`` scoring ``key`` from ``query`` (token indices of
    ``ids``). ``outputs``: the nodes' outputs of this prompt's plain graph run (a CircuitPair's
    ``clean.outputs``), computed here unless given."""
    ids = as_ids(ids)
    config, graph = model.config, CircuitGraph(model.config)
    n_tokens = ids.shape[1]
    if not (0 <= layer < config.n_layers and 0 <= head < config.n_heads):
        raise ValueError(f"no head {head} in layer {layer}: {config.n_layers} layers of {config.n_heads} heads")
    if not (0 <= key <= query < n_tokens):
        raise ValueError(f"query {query} and key {key} must satisfy 0 ≤ key ≤ query < {n_tokens} (a key after "
                         "the query is masked)")
    if outputs is None:
        outputs = run_graph(model, graph, ids, keep_outputs=True).outputs
    outputs = outputs[0] if outputs.dim() == 4 else outputs  # (sources, T, d)
    block, attn = model.layers[layer], model.layers[layer].attn
    dim, kv = attn.head_dim, head // attn.n_groups
    q_rows, kv_rows = slice(head * dim, (head + 1) * dim), slice(kv * dim, (kv + 1) * dim)
    n = graph.layer_start(layer)
    nodes = graph.sources[:n] + ("bias",)
    positions = torch.arange(n_tokens)
    ctx = model.layer_context(layer, positions, positions, outputs.dtype)

    across = graph.qk_norm_across_heads
    q_parts = _head_parts(block, attn.q_proj, attn.q_norm, q_rows, outputs[:n, query], across)
    k_parts = _head_parts(block, attn.k_proj, attn.k_norm, kv_rows, outputs[:n, key], across)
    pairs = attn.scale * _rotated(ctx, q_parts, query) @ _rotated(ctx, k_parts, key).T  # (n + 1, n + 1)

    recorder = _OneLayer(layer)
    model(ids, record=recorder, last_only=True)
    q_rot, k_rot, v = recorder.kept["q_rot"][0, head], recorder.kept["k_rot"][0, kv], recorder.kept["v"][0, kv]
    row = attn.scale * (k_rot @ q_rot[query])  # (T,)
    score = float(row[key])
    capped = attn.cap_scores(row)
    mask = ctx.causal_mask(capped.dtype)
    probs = head_weights(attn, (capped + mask[min(head, mask.shape[0] - 1), query]).float(), head)
    w_o = attn.o_proj.weight[:, q_rows]  # (d, D)
    written = w_o @ (probs.to(v.dtype) @ v)  # (d,): the head's output at the query
    direction = written / written.norm().clamp_min(torch.finfo(written.dtype).tiny)
    v_parts = _parts(block, attn.v_proj, kv_rows, outputs[:n, key])  # (n + 1, D)
    value_parts = probs[key].to(v.dtype) * (v_parts @ w_o.T @ direction)
    return QKBreakdown(layer=layer, head=head, query=query, key=key, score=score,
                       capped_score=float(capped[key]) if attn.softcapped else None, weight=float(probs[key]),
                       query_nodes=nodes, key_nodes=nodes, pairs=pairs, value_nodes=nodes, value_parts=value_parts)
