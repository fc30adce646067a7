"""The recorder of one decoding step (the seam of txviz.model.recording): it keeps the attention
row of the step's last query on the layers and heads asked for, the residual stream at that
position after every layer when the logit lens is asked for, and hands the windowed layers' new keys
and values to the run's KVHistory. Every other layer gets the null recorder, so it runs as in a
plain call (the fused attention kernel, nothing kept).

The row is rebuilt from what the step computes anyway, so the asked layers keep the fused kernel
too: the last query's rotated q, kept during the call, against the keys the cache holds after it,
softmax(cap(q·Kᵀ·scale)) as the eager path computes it, for every asked layer in one batched product
after the call: one product instead of about a dozen small operations per layer (K and V copied per
query head, a mask built, the product with V), each a parallel region that waits for a busy core on a
shared machine; and the model's arithmetic stays a plain step's to the bit. That needs every
key the query sees in the cache, in position order, nothing added to the scores but the cap, and
weights that are their plain softmax: a layer whose cache is a ring (a sliding window shorter than the
run), a model with ALiBi's bias or a layer with a learned sink (its own ``weights``) takes the eager
path instead and its row is read from the weights the call computes.

The keys a cached step attends to on such a layer are in the cache's order (a sliding layer's ring is
not sorted by position); the row is put back in position order, 0..query position, with 0 for keys
outside the window, which the mask gave exactly 0 weight anyway.
"""

from __future__ import annotations

import torch

from txviz.decoding.history import KVHistory
from txviz.model.attention import Attention
from txviz.model.recording import NULL_LAYER_RECORDER


class _LayerView:
    def __init__(self, index: int, wanted: frozenset[str], recorder: "StepRecorder"):
        self._index, self._recorder = index, recorder
        self.wanted = wanted

    def wants(self, name: str) -> bool:
        return name in self.wanted

    def __call__(self, name: str, tensor: torch.Tensor) -> None:
        if name == "attn_probs" and name in self.wanted:
            self._recorder.keep_row(self._index, tensor)
        elif name == "q_rot" and name in self.wanted:
            self._recorder.keep_query(self._index, tensor)

    def many(self, **tensors: torch.Tensor) -> None:
        if "k_rot" in tensors and "k_rot" in self.wanted:
            self._recorder.history.add(self._index, tensors["k_rot"], tensors["v"])
        for name, tensor in tensors.items():
            self(name, tensor)

    def attention_rows(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        pass

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor


def rows_from_queries(model, cache, layer: int) -> bool:
    """Whether ``layer``'s row can be rebuilt from its query and its cached keys (module docstring): its
    weights a plain softmax of the scores (not a learned sink's), no ALiBi bias, every key in the cache."""
    plain_weights = type(model.layers[layer].attn).weights is Attention.weights
    return plain_weights and model.config.positions != "alibi" and cache.layer(layer).window is None


class StepRecorder:
    """One forward call of a decoding run (the prompt, or one token) after ``cache_len`` cached tokens."""

    def __init__(self, cache, n_new: int, *, attention_layers: tuple[int, ...], heads: tuple[int, ...],
                 lens: bool, history: KVHistory, model=None):
        self.history, self.lens, self._cache = history, lens, cache
        self.query_position = cache.seq_len + n_new - 1
        self._heads = torch.tensor(heads, dtype=torch.long)
        from_queries = {i for i in attention_layers if model is not None and rows_from_queries(model, cache, i)}
        if from_queries:
            attention = model.layers[min(from_queries)].attn
            self._scale, self._cap = attention.scale, attention.cap_scores
            self._kv_heads = self._heads // attention.n_groups  # the KV head each asked head reads
        # positions of the keys each eager layer will attend to, in the order its cache returns them
        self._key_positions = {i: cache.layer(i).key_positions(cache.seq_len, n_new)
                               for i in attention_layers if i not in from_queries}
        self._rows: dict[int, torch.Tensor] = {}
        self._queries: dict[int, torch.Tensor] = {}
        self._residuals: list[torch.Tensor] = []
        self._views = {}
        for i in set(attention_layers) | history.layers:
            wanted = ({"q_rot"} if i in from_queries else {"attn_probs"} if i in self._key_positions else set()) | \
                     ({"k_rot", "v"} if i in history.layers else set())
            self._views[i] = _LayerView(i, frozenset(wanted), self)

    def layer(self, index: int):
        return self._views.get(index, NULL_LAYER_RECORDER)

    def globals(self, ctx, positions) -> None:
        pass

    def residual(self, index: int, x: torch.Tensor) -> None:
        if self.lens:
            self._residuals.append(x[0, -1])  # (d,): the step's last position

    def keep_query(self, layer: int, q_rot: torch.Tensor) -> None:
        """q_rot (B, H, T, D) of one layer → the last query of the asked heads (heads, D), a view."""
        self._queries[layer] = q_rot[0, :, -1]

    def keep_row(self, layer: int, probs: torch.Tensor) -> None:
        """probs (B, H, T, S) of one layer → the last query's row of the asked heads, by position."""
        row = probs[0, self._heads.to(probs.device), -1].float()  # (heads, S) in the cache's order
        dense = torch.zeros(row.shape[0], self.query_position + 1, dtype=torch.float32, device=row.device)
        dense[:, self._key_positions[layer].to(row.device)] = row
        self._rows[layer] = dense.cpu()

    def rows(self) -> dict[int, torch.Tensor]:
        """layer → (heads, query position + 1) weights, once the call is over: the eager layers' rows as
        kept, the others rebuilt from their queries against the cache, by device, one product each."""
        rows = dict(self._rows)
        by_device: dict[torch.device, list[int]] = {}
        for layer in sorted(self._queries):
            by_device.setdefault(self._queries[layer].device, []).append(layer)
        for layers in by_device.values():
            rows.update(zip(layers, self._rebuilt(layers)))
        return dict(sorted(rows.items()))

    def _rebuilt(self, layers: list[int]) -> torch.Tensor:
        """(layers, heads, S) weights of the last query on ``layers`` (all on one device), S = its position + 1."""
        n_keys = self.query_position + 1
        device = self._queries[layers[0]].device
        heads, kv_heads = self._heads.to(device), self._kv_heads.to(device)
        queries = torch.stack([self._queries[i] for i in layers])[:, heads, None]  # (n, heads, 1, D)
        keys = torch.stack([self._cache.layer(i).k[0, :, :n_keys] for i in layers])[:, kv_heads]  # (n, heads, S, D)
        logits = self._cap(torch.matmul(queries, keys.transpose(-1, -2)) * self._scale)  # (n, heads, 1, S)
        probs = torch.softmax(logits, dim=-1, dtype=torch.float32).to(queries.dtype)  # as the eager path rounds them
        return probs[:, :, 0].float().cpu()

    def residuals(self) -> torch.Tensor:
        """(L+1, d): the residual stream at the step's last position after the embedding and each layer."""
        return torch.stack(self._residuals)
