"""The recorder of one decoding step (the seam of txviz.model.recording): it keeps the attention
row of the step's last query on the layers and heads asked for, the residual stream at that
position after every layer when the logit lens is asked for, and hands the windowed layers' new keys
and values to the run's KVHistory. Every other layer gets the null recorder, so it runs as in a
plain call (the fused attention kernel, nothing kept).

The keys a cached step attends to are in the cache's order (a sliding layer's ring is not sorted by
position); the row is put back in position order, 0..query position, with 0 for keys outside the
window, which the mask gave exactly 0 weight anyway.
"""

from __future__ import annotations

import torch

from txviz.decoding.history import KVHistory
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

    def many(self, **tensors: torch.Tensor) -> None:
        if "k_rot" in tensors and "k_rot" in self.wanted:
            self._recorder.history.add(self._index, tensors["k_rot"], tensors["v"])
        for name, tensor in tensors.items():
            self(name, tensor)

    def attention_rows(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        pass

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor


class StepRecorder:
    """One forward call of a decoding run (the prompt, or one token) after ``cache_len`` cached tokens."""

    def __init__(self, cache, n_new: int, *, attention_layers: tuple[int, ...], heads: tuple[int, ...],
                 lens: bool, history: KVHistory):
        self.history, self.lens = history, lens
        self.query_position = cache.seq_len + n_new - 1
        self._heads = torch.tensor(heads, dtype=torch.long)
        # positions of the keys each asked layer will attend to, in the order its cache returns them
        self._key_positions = {i: cache.layer(i).key_positions(cache.seq_len, n_new) for i in attention_layers}
        self.rows: dict[int, torch.Tensor] = {}
        self._residuals: list[torch.Tensor] = []
        self._views = {}
        for i in set(attention_layers) | history.layers:
            wanted = ({"attn_probs"} if i in self._key_positions else set()) | \
                     ({"k_rot", "v"} if i in history.layers else set())
            self._views[i] = _LayerView(i, frozenset(wanted), self)

    def layer(self, index: int):
        return self._views.get(index, NULL_LAYER_RECORDER)

    def globals(self, ctx, positions) -> None:
        pass

    def residual(self, index: int, x: torch.Tensor) -> None:
        if self.lens:
            self._residuals.append(x[0, -1])  # (d,): the step's last position

    def keep_row(self, layer: int, probs: torch.Tensor) -> None:
        """probs (B, H, T, S) of one layer → the last query's row of the asked heads, by position."""
        row = probs[0, self._heads.to(probs.device), -1].float()  # (heads, S) in the cache's order
        dense = torch.zeros(row.shape[0], self.query_position + 1, dtype=torch.float32, device=row.device)
        dense[:, self._key_positions[layer].to(row.device)] = row
        self.rows[layer] = dense.cpu()

    def residuals(self) -> torch.Tensor:
        """(L+1, d): the residual stream at the step's last position after the embedding and each layer."""
        return torch.stack(self._residuals)
