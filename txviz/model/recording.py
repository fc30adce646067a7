"""What the model tells a recorder during one forward call, and the recorder that keeps nothing.

A Decoder is handed one recorder per call (``txviz.capture.trace.Recorder`` keeps frozen CPU copies,
``txviz.lab.recorder.LiveRecorder`` keeps tensors with their gradients). It offers the recorder the
positions of the call and the residual stream after every layer, and hands each layer the view
``layer(i)``, to which attention and a MoE offer their tensors by name. What a layer wants also picks
its attention path (``txviz.model.attention.attention_path``).

A plain call gets ``NULL_RECORDER``: it wants nothing and keeps nothing, so the forward code is the
same straight line with or without capture (no ``if record is not None``).

Interventions use the same seam: at a few named points (``EDIT_POINTS``) a layer hands its tensor to
``edit(name, tensor)`` and continues with what comes back. Every recorder here returns the tensor
unchanged; ``txviz.causal.intervention.Intervention`` returns it ablated or patched, for one call.
"""

from __future__ import annotations

from typing import Protocol

import torch

# name → shape of the tensors a layer hands to ``edit`` (B batch, H heads, Hkv KV heads, T tokens,
# D head_dim, d model width): T is always dimension −2.
EDIT_POINTS = {
    "resid_pre": "(B, T, d) the residual stream entering the layer",
    "q": "(B, H, T, D) queries before RoPE", "k": "(B, Hkv, T, D) keys before RoPE", "v": "(B, Hkv, T, D) values",
    "head_out": "(B, H, T, D) each head's output before o_proj",
    "ffn_out": "(B, T, d) the FFN's (MLP's or MoE's) output",
    "resid_post": "(B, T, d) the residual stream leaving the layer",
}


class LayerRecorderProtocol(Protocol):
    """One layer's view of a recorder."""

    @property
    def wanted(self) -> frozenset[str]: ...

    def wants(self, name: str) -> bool: ...

    def __call__(self, name: str, tensor: torch.Tensor) -> None: ...

    def many(self, **tensors: torch.Tensor) -> None: ...

    def attention_rows(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        """A block of query rows of the layer's attention (for ``head_summaries``)."""

    # A recorder whose ``map_blocks`` is True (read with getattr, False when absent) takes ``attn_probs``
    # a block of rows at a time: ``map_rows(rows, keys, weights, (T, S))`` instead of one (B, H, T, S) call.

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """The tensor the layer continues with at edit point ``name`` (see EDIT_POINTS)."""


class RecorderProtocol(Protocol):
    """What a Decoder calls on the recorder of one forward call."""

    def layer(self, index: int) -> LayerRecorderProtocol: ...

    def globals(self, ctx, positions) -> None:
        """The call's AttentionContext and the model's positions module, once, before the layers."""

    def residual(self, index: int, x: torch.Tensor) -> None:
        """The residual stream after ``index`` layers (0: the embeddings)."""


class NullLayerRecorder:
    """Wants nothing: every layer of a plain call (and every uncaptured layer of a trace) gets it."""

    wanted: frozenset[str] = frozenset()

    def wants(self, name: str) -> bool:
        return False

    def __call__(self, name: str, tensor: torch.Tensor) -> None:
        pass

    def many(self, **tensors: torch.Tensor) -> None:
        pass

    def attention_rows(self, rows: slice, keys: slice, probs: torch.Tensor, scores: torch.Tensor) -> None:
        pass

    def edit(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        return tensor


class NullRecorder:
    """The recorder of a plain call: keeps nothing. Stateless, so one instance serves every call."""

    def layer(self, index: int) -> NullLayerRecorder:
        return NULL_LAYER_RECORDER

    def globals(self, ctx, positions) -> None:
        pass

    def residual(self, index: int, x: torch.Tensor) -> None:
        pass


NULL_LAYER_RECORDER = NullLayerRecorder()
NULL_RECORDER = NullRecorder()
