"""The decoder run node by node, each target reading its own residual stream: the forward pass of the
circuit graph (txviz.circuit.graph), with any edges patched.

Every source's output is kept as it is computed; the residual stream is their running sum. A target v
reads

    input_v = Σ_u out_u − Σ_u ε[v, u] · (out_u − corrupt_u)

where out_u is u's output in this run, corrupt_u its output in the corrupt run, and ε the patch:
ε = 1 replaces u's contribution to v's input (and to v's alone) by its corrupt one, ε = 0 keeps it;
fractions interpolate (integrated gradients, txviz.circuit.eap). Each head's q, k and v inputs go
through the layer's own norm and that head's rows of the projections, so a patched edge changes the
input *before* the pre-norm, as it would in the model. A QK-norm across all heads (OLMo 2, OLMoE) reads
every head's rows: head h's query input then goes through the whole query projection, is normed as
the model norms it, and head h keeps its own rows (its key input the same over the KV heads), so the
H copies cost H times the model's query and key projections there and nowhere else. The MLP reads its
own input the same way; the logits read theirs through the final norm. Gemma's post-attention norm is
applied to the sum of the heads with its scale from that sum, and each head's output is its share
(txviz.circuit.frozen), so the shares add up to what joins the residual stream. An output-projection
bias is split evenly between the heads, so it is no edge of its own and is the same in every run.

With no edge patched the run is the model's own forward pass (eager attention: softmax(cap(QKᵀ·s) + M)V,
the mask with ALiBi and sliding windows from the model's own AttentionContext), up to float rounding of
the reordered sums; the tests hold it to the model's logits. The model's weights are only read: nothing
is left on the model, and every tensor of a run lives in the GraphRun it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from txviz.circuit.frozen import frozen_shares
from txviz.circuit.graph import CircuitGraph
from txviz.model.recording import NULL_LAYER_RECORDER


@dataclass
class GraphRun:
    outputs: torch.Tensor | None  # (B, sources, T, d) every source's output (None unless kept)
    logits: torch.Tensor  # (B, V) at the last position
    inputs: list[tuple[slice, torch.Tensor]] | None  # target rows and their inputs, for gradients


class _Patch:
    """ε (B, targets, sources) and the (out − corrupt) blocks it multiplies, one block per computed
    group of sources (the embeddings, a layer's heads, an MLP)."""

    def __init__(self, patch: torch.Tensor | None, corrupt: torch.Tensor | None, dtype: torch.dtype,
                 first: int = 0):
        self.first = first  # positions before it are the same in both runs: no difference to patch in
        self.active = patch is not None and bool(patch.any())
        if self.active and corrupt is None:
            raise ValueError("a patch needs the corrupt run's outputs (corrupt=)")
        self.patch = None if patch is None else patch.to(dtype)
        self.corrupt = None if corrupt is None else corrupt.reshape(-1, *corrupt.shape[-3:])[0]  # (N, T, d)
        self.blocks: list[tuple[int, torch.Tensor]] = []  # (first source, (B, P, T, d))
        self.n = 0

    def add(self, outputs: torch.Tensor) -> None:
        """Sources n, n+1, … have these outputs (B, P, T, d)."""
        if self.active:
            self.blocks.append((self.n, outputs - self.corrupt[self.n:self.n + outputs.shape[1]]))
        self.n += outputs.shape[1]

    def delta(self, rows: slice, n_sources: int, last_only: bool = False) -> torch.Tensor | None:
        """(B, R, T, d): Σ_u ε[v, u]·(out_u − corrupt_u) for the target rows, or None where ε is 0.
        Block by block, skipping blocks of no patched edge (EAP-IG patches only the embeddings')."""
        if not self.active:
            return None
        weights = self.patch[:, rows, :n_sources]  # (B, R, n)
        used = weights.any(dim=1).any(dim=0)  # (n,)
        total = None
        for start, block in self.blocks:
            stop = start + block.shape[1]
            if stop > n_sources or not bool(used[start:stop].any()):
                continue
            block = block[:, :, -1:] if last_only else block[:, :, self.first:]
            b, p, t, d = block.shape
            if total is None:  # the first block's product, then the others added in place (no copies)
                total = torch.bmm(weights[:, :, start:stop], block.reshape(b, p, t * d))
            else:
                total.baddbmm_(weights[:, :, start:stop], block.reshape(b, p, t * d))
        return None if total is None else total.view(b, -1, t, d)


def _minus(x: torch.Tensor, delta: torch.Tensor | None) -> torch.Tensor:
    """A target's input: a tensor of its own (a view where nothing is patched), so the gradient taken
    at it is the target's alone and not the residual stream's, which other nodes read too. ``delta``
    covers the last positions only where the first ones are the same in both runs."""
    if delta is None:
        return x.view_as(x)
    first = x.shape[-2] - delta.shape[-2]
    if first == 0:
        return x - delta
    return torch.cat([x[..., :first, :].expand(*delta.shape[:-2], first, -1), x[..., first:, :] - delta], dim=-2)


def embed_output(model, ids: torch.Tensor) -> torch.Tensor:
    """(1, T, d): what the model adds to the residual stream before the first layer."""
    positions = torch.arange(ids.shape[1], device=ids.device)
    x = model.embed(ids) * model._embed_scale(model.embed.weight.dtype)
    return model.embed_norm(model.positions.add_to_embeddings(x, positions))


def heads_qkv(layer, ctx, x: torch.Tensor, across_heads: bool = False):
    """x (B, 3H, T, d): every head's q, k and v inputs (head-major within each) → (q, k, v), each
    (B, H, T, D): each head's rotated query and key and its value, from that head's own input copies.
    ``across_heads``: the layer's QK-norm normalizes every head's query (and key) together
    (txviz.circuit.graph.qk_norm_across_heads)."""
    # legend: B batch, H query heads, Hkv KV heads, g heads per KV head, T tokens, D head_dim, d width
    attn = layer.attn
    h, h_kv, dim = attn.n_heads, attn.n_kv_heads, attn.head_dim
    x_q, x_k, x_v = layer.attn_norm(x).split(h, dim=1)  # (B, H, T, d) each
    q = _normed_projection(x_q, attn.q_proj, attn.q_norm, h, dim, 1, across_heads)  # (B, H, T, D)
    k = _normed_projection(x_k, attn.k_proj, attn.k_norm, h_kv, dim, attn.n_groups, across_heads)
    v = _project(x_v, attn.v_proj, h_kv, dim, attn.n_groups)  # KV head j's rows for each of its g heads
    return ctx.rotate(q), ctx.rotate(k), v


def attention_heads(layer, ctx, x: torch.Tensor, across_heads: bool = False) -> torch.Tensor:
    """x (B, 3H, T, d): every head's q, k and v inputs (head-major within each) → (B, H, T, d), each
    head's write into the residual stream."""
    # legend: B batch, H query heads, T tokens, D head_dim, d width
    attn = layer.attn
    h, dim = attn.n_heads, attn.head_dim
    q, k, v = heads_qkv(layer, ctx, x, across_heads)  # (B, H, T, D) each
    logits = attn.cap_scores(torch.matmul(q, k.transpose(2, 3)) * attn.scale)  # (B, H, T, T)
    # the layer's own weights (a learned sink where it has one): float32, float64 kept for checks
    probs = attn.weights(logits + ctx.causal_mask(logits.dtype), NULL_LAYER_RECORDER).to(q.dtype)
    heads = torch.matmul(probs, v)  # (B, H, T, D)
    w_o = attn.o_proj.weight.view(-1, h, dim)  # (d, H, D)
    out = torch.einsum("bhte,mhe->bhtm", heads, w_o)  # (B, H, T, d)
    if attn.o_proj.bias is not None:
        out = out + attn.o_proj.bias / h
    shares, bias = frozen_shares(layer.post_attn_norm, out, part_dim=1)
    shares = shares if bias is None else shares + bias / h
    return layer.scale_residual(shares)  # × Granite's residual multiplier; the identity elsewhere


def _normed_projection(x: torch.Tensor, proj, norm, n_rows: int, dim: int, groups: int,
                       across_heads: bool) -> torch.Tensor:
    """x (B, H, T, d) each head's own input → (B, H, T, D) its query (or key) after the QK-norm. The norm
    reads the rows of the projection it normalizes together: a per-head norm only the head's own (KV)
    rows, so those alone are projected; a norm across heads every (KV) head's rows, so head i's input goes
    through all of them, is normed as the model norms its whole projection, and head i keeps the rows
    of its own (KV) head i // groups."""
    if not across_heads:
        return norm(_project(x, proj, n_rows, dim, groups))
    b, h, t, _ = x.shape
    every = proj(x).view(b * h, t, n_rows, dim).transpose(1, 2)  # (B·H, R, T, D): one projection per head's input
    normed = norm(every).view(b, h, n_rows, t, dim)  # (B, H, R, T, D)
    own = torch.arange(h, device=x.device) // groups
    return normed[:, torch.arange(h, device=x.device), own]  # (B, H, T, D)


def _project(x: torch.Tensor, proj, n_rows: int, dim: int, groups: int) -> torch.Tensor:
    """x (B, H, T, d) → (B, H, T, D): head i through the rows of ``proj`` of its (KV) head i // groups."""
    weight = proj.weight.view(n_rows, dim, -1).repeat_interleave(groups, dim=0)  # (H, D, d)
    out = torch.einsum("bhtm,hem->bhte", x, weight)
    if proj.bias is not None:
        out = out + proj.bias.view(n_rows, 1, dim).repeat_interleave(groups, dim=0)
    return out


def mlp_output(layer, x: torch.Tensor) -> torch.Tensor:
    """x (B, T, d) the MLP's (or MoE's) input → what it adds to the residual stream."""
    return layer.scale_residual(layer.post_ffn_norm(layer.feed_forward(layer.ffn_norm(x), NULL_LAYER_RECORDER)))


def final_logits(model, x: torch.Tensor) -> torch.Tensor:
    """x (B, 1, d) the final residual at the last position → (B, V)."""
    x = model.final_norm(x)
    logits = model.lm_head(x) if model.lm_head is not None else torch.nn.functional.linear(x, model.embed.weight)
    return model.cap_logits(logits)[:, -1]


def run_graph(model, graph: CircuitGraph, ids: torch.Tensor, *, patch: torch.Tensor | None = None,
              corrupt: torch.Tensor | None = None, keep_outputs: bool = False,
              keep_inputs: bool = False, same_until: int = 0) -> GraphRun:
    """One run of ``ids`` (1, T) with ``patch`` (B, targets, sources) of edges from ``corrupt`` (1, sources,
    T, d), the corrupt run's outputs; B runs side by side (B = 1 without a patch). ``keep_inputs``: each
    target's input tensor, to differentiate the metric by (txviz.circuit.eap). ``same_until``: the
    positions before it hold the same tokens in both prompts, so (causal attention) the same outputs:
    the differences patched in are computed from there on only."""
    ids = model.check_ids(ids)
    n_rows = 1 if patch is None else patch.shape[0]
    x = embed_output(model, ids).expand(n_rows, -1, -1)  # (B, T, d)
    patched = _Patch(patch, corrupt, x.dtype, min(same_until, ids.shape[1] - 1))
    patched.add(x[:, None])
    outputs, inputs = [x[:, None]], []
    positions = torch.arange(ids.shape[1], device=ids.device)
    n_heads = graph.n_heads
    for i, layer in enumerate(model.layers):
        ctx = model.layer_context(i, positions, positions, x.dtype)
        rows = graph.layer_targets(i)
        heads_rows = slice(rows.start, rows.stop - 1)
        x_heads = _minus(x[:, None].expand(-1, 3 * n_heads, -1, -1),
                         patched.delta(heads_rows, graph.layer_start(i)))  # (B, 3H, T, d)
        heads = attention_heads(layer, ctx, x_heads, graph.qk_norm_across_heads)  # (B, H, T, d)
        patched.add(heads)
        mid = x if graph.parallel else x + heads.sum(1)
        x_mlp = _minus(mid, _squeeze(patched.delta(slice(rows.stop - 1, rows.stop), graph.targets[rows.stop - 1].n_sources)))
        mlp = mlp_output(layer, x_mlp)  # (B, T, d)
        patched.add(mlp[:, None])
        x = mid + mlp if not graph.parallel else x + heads.sum(1) + mlp
        outputs += [heads, mlp[:, None]]
        inputs += [(heads_rows, x_heads), (slice(rows.stop - 1, rows.stop), x_mlp)]
    x_final = _minus(x[:, -1:], _squeeze(patched.delta(slice(graph.logits_target, None), len(graph.sources),
                                                       last_only=True)))
    inputs.append((slice(graph.logits_target, None), x_final))
    return GraphRun(torch.cat(outputs, dim=1) if keep_outputs else None, final_logits(model, x_final),
                    inputs if keep_inputs else None)


def _squeeze(delta: torch.Tensor | None) -> torch.Tensor | None:
    """A one-target delta (B, 1, T, d) → (B, T, d)."""
    return None if delta is None else delta[:, 0]
