"""Placing a Decoder's layers over devices, for models that do not fit one: through 🤗 accelerate.

A device map sends each top-level part of the Decoder somewhere: ``embed``, ``positions`` (learned
only), ``layers.{i}`` (a ``Block`` is never split), ``final_norm`` and ``lm_head`` (untied only) each
to a GPU index, to ``"cpu"`` or to ``"disk"``. accelerate's hooks move the hidden states from device to
device and, for offloaded parts (weights on the meta device), bring the weights in for each forward
and drop them after. On a machine with GPUs ``"cpu"`` means kept in CPU RAM and run on the first GPU;
with none, the model runs on the CPU and only ``"disk"`` is offloaded (accelerate's rule).

    dispatch(model, {"embed": 0, "layers.0": 0, "layers.1": 1, "final_norm": 1, "lm_head": "cpu"})
    dispatch(model, "auto", max_memory={0: "20GiB", 1: "20GiB", "cpu": "64GiB"}, offload_dir="/tmp/off")

The model itself needs nothing more (txviz.model.transformer): every weight is used by calling its
module, so a hook sees it; position tables and masks follow the queries (``AttentionContext.on``);
``layer_devices`` tells a KV cache where each layer's K and V belong; and a Recorder copies each
capture to the CPU as the layer offers it, so captures never pile up on an accelerator.
``trace``, ``generate`` and a plain forward take the dispatched model as they take any other.

accelerate is optional (``pip install accelerate``, or the ``multi`` extra) and imported only here.
"""

from __future__ import annotations

import os
from typing import Mapping

import torch
from torch import nn

NO_SPLIT = ["Block"]  # a block's residual additions need its sublayers together
STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")  # as in transformers' device_map=


class PlacementError(ValueError):
    """A device map that cannot be used, or accelerate missing."""


def _accelerate():
    try:
        import accelerate
    except ImportError as exc:
        raise PlacementError("spreading a model over devices needs accelerate: pip install accelerate "
                             "(or pip install 'txviz[multi]')") from exc
    return accelerate


def device_map_for(model: nn.Module, strategy: str = "auto", *,
                   max_memory: Mapping[int | str, int | str] | None = None) -> dict[str, int | str]:
    """The device map accelerate infers from ``max_memory`` (device → bytes or "20GiB"; None: what this
    machine has). "auto"/"balanced" spread the blocks evenly over the GPUs, "balanced_low_0" keeps GPU 0
    light, "sequential" fills each device in turn; what fits nowhere goes to the CPU, then the disk."""
    accelerate = _accelerate()
    if strategy not in STRATEGIES:
        raise PlacementError(f"unknown device map strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    memory = dict(max_memory) if max_memory is not None else None
    if strategy != "sequential":
        memory = accelerate.utils.get_balanced_memory(model, max_memory=memory, no_split_module_classes=NO_SPLIT,
                                                      low_zero=strategy == "balanced_low_0")
    return dict(accelerate.infer_auto_device_map(model, max_memory=memory, no_split_module_classes=NO_SPLIT))


def offloaded(device_map: Mapping[str, int | str]) -> list[str]:
    """The parts whose weights leave for the meta device: "disk", and "cpu" when a GPU is in the map."""
    values = set(device_map.values())
    on_accelerator = any(value not in ("cpu", "disk") for value in values)
    kinds = ("cpu", "disk") if on_accelerator else ("disk",)
    return [name for name, value in device_map.items() if value in kinds]


def _check(model: nn.Module, device_map: Mapping[str, int | str]) -> None:
    """Refuse names that are not the model's modules, and a tied embedding that would be offloaded (the
    logits reuse its weight outside its own forward, where no hook would bring it in)."""
    modules = dict(model.named_modules())
    unknown = [name for name in device_map if name not in modules]
    if unknown:
        parts = [name for name, module in model.named_children() if name != "layers"] + ["layers.0", "..."]
        raise PlacementError(f"{unknown[:5]} are not modules of this model; name its parts: {', '.join(parts)}")
    if model.lm_head is None and any(name in ("", "embed") for name in offloaded(device_map)):
        raise PlacementError("this model ties its embedding to the output layer: keep 'embed' on a device "
                             "that runs it (a GPU, or the CPU on a machine without one), not offloaded")


def dispatch(model: nn.Module, device_map: str | Mapping[str, int | str] = "auto", *,
             max_memory: Mapping[int | str, int | str] | None = None,
             offload_dir: str | os.PathLike | None = None) -> nn.Module:
    """Spread ``model`` over devices with accelerate and return it (the same module, hooked in place).

    ``device_map`` is a strategy (see ``device_map_for``) or a map of module names to devices. Parts
    mapped to "disk" are written to ``offload_dir`` and read back for each forward. The model's outputs
    come back on the device of its input ids; ``model.hf_device_map`` records the map."""
    accelerate = _accelerate()
    if isinstance(device_map, str):
        device_map = device_map_for(model, device_map, max_memory=max_memory)
    device_map = dict(device_map)
    _check(model, device_map)
    if "disk" in device_map.values() and offload_dir is None:
        raise PlacementError(f"{offloaded(device_map)} go to disk: give an offload_dir to write them to")
    try:
        return accelerate.dispatch_model(model, device_map, offload_dir=offload_dir)
    except (ValueError, RuntimeError) as exc:  # e.g. parameters the map does not cover
        raise PlacementError(f"accelerate could not dispatch the model with {device_map}: {exc}") from exc


def compute_device(module: nn.Module) -> torch.device:
    """Where ``module`` runs: the execution device of the first accelerate hook in it (its weights may be
    offloaded to meta), else where its parameters are."""
    for sub in module.modules():
        hook = getattr(sub, "_hf_hook", None)
        for part in getattr(hook, "hooks", (hook,)):  # a SequentialHook holds several
            device = getattr(part, "execution_device", None)
            if device is not None:
                return torch.device(device)
    return next(module.parameters()).device


def layer_devices(model: nn.Module) -> list[torch.device]:
    """The device each block runs on: where a KV cache keeps that layer's K and V."""
    return [compute_device(layer) for layer in model.layers]
