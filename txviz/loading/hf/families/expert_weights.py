"""Experts stored stacked, one 3-D tensor for all of a layer's experts, split into one tensor per expert.

transformers 5 keeps every MoE family's experts as ``experts.gate_up_proj`` (E, 2F, d), each expert's
gate rows then its up rows, and ``experts.down_proj`` (E, d, F); Granite's published checkpoints store
the same two stacks as ``input_linear.weight`` and ``output_linear.weight``. Published Qwen-MoE and OLMoE
checkpoints (and transformers' save_pretrained) write one tensor per expert, which the family tables
name directly; this brings the stacked layouts to that one.
"""

from __future__ import annotations

import torch

from txviz.config import ModelConfig
from txviz.loading.errors import ModelLoadError

Tensors = dict[str, torch.Tensor]
GATE_UP = (".experts.gate_up_proj", ".input_linear.weight")
DOWN = (".experts.down_proj", ".output_linear.weight")


def split_stacked_experts(tensors: Tensors, config: ModelConfig) -> Tensors:
    out: Tensors = {}
    for name, tensor in tensors.items():
        stack = next((s for s in GATE_UP + DOWN if name.endswith(s)), None)
        if stack is None:
            out[name] = tensor
            continue
        _check(name, tensor, config, gate_up=stack in GATE_UP)
        base = name[: -len(stack)]
        for e, expert in enumerate(tensor.unbind(0)):
            prefix = f"{base}.experts.{e}"
            if stack in GATE_UP:
                out[f"{prefix}.gate_proj.weight"], out[f"{prefix}.up_proj.weight"] = expert.chunk(2, dim=0)
            else:
                out[f"{prefix}.down_proj.weight"] = expert
    return out


def _check(name: str, tensor: torch.Tensor, config: ModelConfig, gate_up: bool) -> None:
    d, f, e = config.d_model, config.expert_width, config.n_experts
    expected = (e, 2 * f, d) if gate_up else (e, d, f)
    if tuple(tensor.shape) != expected:
        raise ModelLoadError(f"{name}: shape {tuple(tensor.shape)} does not match config.json's {expected}")
