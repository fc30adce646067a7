"""A model that differs from another in a few parameters, sharing everything else.

A counterfactual (a layer's KV heads merged, say) changes a handful of tensors; building a whole new
Decoder for it costs a module tree on the meta device and a ``load_state_dict`` of every tensor. Here
only the modules on the path to a replaced parameter are copied (shallowly: the copy's own dicts of
parameters, buffers, children and hooks, the same tensors and the same untouched children), so a
variant of a 30-layer model that replaces two tensors copies four modules. The model keeps no state
between calls, so sharing the untouched modules between the two is safe; nothing here writes to a
tensor, and the original is never changed.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def with_parameters(model: nn.Module, replacements: dict[str, torch.Tensor]) -> nn.Module:
    """``model`` with the parameters named in ``replacements`` (``state_dict`` names) replaced by the
    given tensors, which must have the shapes of those they replace; every other tensor and every module
    off their paths is shared with ``model``. Raises KeyError for a name that is not a parameter."""
    params = dict(model.named_parameters())
    for name, tensor in replacements.items():
        if name not in params:
            raise KeyError(f"{name!r} is not a parameter of the model")
        if tuple(tensor.shape) != tuple(params[name].shape):
            raise ValueError(f"{name}: shape {tuple(tensor.shape)} does not match {tuple(params[name].shape)}")
    tree: dict = {}
    for name in replacements:
        node = tree
        for part in name.split(".")[:-1]:
            node = node.setdefault(part, {})
    return _copy(model, tree, replacements, "")


def _copy(module: nn.Module, tree: dict, replacements: dict[str, torch.Tensor], prefix: str) -> nn.Module:
    clone = copy.copy(module)  # the same attribute values …
    for key, value in module.__dict__.items():  # … but its own dicts: parameters, buffers, children, hooks
        if isinstance(value, dict):
            clone.__dict__[key] = copy.copy(value)
    for child, subtree in tree.items():
        clone._modules[child] = _copy(module._modules[child], subtree, replacements, f"{prefix}{child}.")
    for name, param in module._parameters.items():
        if f"{prefix}{name}" in replacements:
            new = replacements[f"{prefix}{name}"].to(device=param.device, dtype=param.dtype)
            clone._parameters[name] = nn.Parameter(new, requires_grad=param.requires_grad)
    return clone
