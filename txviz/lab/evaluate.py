"""Held-out evaluation of a lab model: validation loss at the training context and beyond, how evenly
a Mixture of Experts spreads its tokens, and the copy/pronoun probes (txviz.lab.probes).

Extrapolation: the same weights are scored on validation windows of 2× and 4× the
training context. RoPE, ALiBi and no-position models need no new parameters for that (the Decoder is
rebuilt with a longer ``max_seq_len``); learned absolute positions have no vector past their table,
so their longer-context losses are recorded as null, with the reason. Besides the mean over every
token of the longer windows, the loss over the positions the model never saw in training (those at
or past the training context) is reported, where the schemes differ most.

``val_window_losses`` keeps the mean loss of each validation window at the training context: their
spread is the evaluation noise of ``val_loss`` (its standard error is their std / √W), which says
whether two variants' losses differ by more than the text they were scored on.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.lab.balancing import effective_experts
from txviz.lab.data import LabData
from txviz.lab.probes import probes
from txviz.lab.recorder import LiveRecorder
from txviz.model import Decoder

EVAL_BATCH = 8


def with_context(model: Decoder, context: int) -> Decoder | None:
    """The same weights with room for ``context`` tokens; None if the positions cannot be extended."""
    config = model.config
    if context <= config.max_seq_len:
        return model
    if config.positions == "learned":
        return None
    state = {name: tensor.detach() for name, tensor in model.state_dict().items()}
    return Decoder.from_state_dict(config.replace(max_seq_len=context), state)


@torch.inference_mode()
def token_losses(model: Decoder, windows: torch.Tensor, batch: int = EVAL_BATCH) -> torch.Tensor:
    """(W, T) next-token cross-entropy at every position of every (W, T + 1) window."""
    out = []
    for chunk in windows.split(batch):
        logits = model(chunk[:, :-1])  # (b, T, V)
        out.append(F.cross_entropy(logits.float().transpose(1, 2), chunk[:, 1:], reduction="none"))
    return torch.cat(out)


@torch.inference_mode()
def window_losses(model: Decoder, windows: torch.Tensor, batch: int = 64) -> torch.Tensor:
    """(W,) mean next-token loss of each window: the pieces whose spread gives the evaluation noise.
    (Larger batches than training's evaluation: fewer calls, the same numbers to float rounding.)"""
    return token_losses(model, windows, batch).mean(dim=-1)


def extrapolation(model: Decoder, data: LabData, context: int, factors=(2, 4)) -> dict:
    """Validation loss at ``context`` and at each ``factor`` × ``context`` (null where impossible)."""
    result = {"context": context, "loss_at": {}, "loss_beyond_context_at": {}, "why_null": None}
    for factor in (1, *factors):
        length = factor * context
        extended = with_context(model, length)
        if extended is None:
            result["loss_at"][str(length)] = result["loss_beyond_context_at"][str(length)] = None
            result["why_null"] = (f"learned absolute positions: the table has {model.config.max_seq_len} rows, "
                                  f"so positions {model.config.max_seq_len} and later have no embedding")
            continue
        losses = token_losses(extended, data.val_windows(length))  # (W, length)
        result["loss_at"][str(length)] = round(float(losses.mean()), 4)
        if factor > 1:
            result["loss_beyond_context_at"][str(length)] = round(float(losses[:, context:].mean()), 4)
    return result


def _rounded(loads: list[torch.Tensor]) -> list[list[float]]:
    return [[round(float(v), 4) for v in load] for load in loads]


@torch.inference_mode()
def routing_load(model: Decoder, data: LabData, context: int) -> dict | None:
    """Per MoE layer, the fraction of routing assignments each expert got on the validation windows
    (all k choices counted), and the fraction of tokens whose first choice it was."""
    config: ModelConfig = model.config
    if not config.is_moe:
        return None
    counts = torch.zeros(config.n_layers, config.n_experts)
    first = torch.zeros(config.n_layers, config.n_experts)
    for chunk in data.val_windows(context).split(EVAL_BATCH):
        recorder = LiveRecorder(("expert_ids",), config.n_layers)
        model(chunk[:, :-1], record=recorder)
        for i, ids in enumerate(recorder["expert_ids"]):  # (b, T, K), best first
            counts[i] += torch.bincount(ids.reshape(-1), minlength=config.n_experts).float()
            first[i] += torch.bincount(ids[..., 0].reshape(-1), minlength=config.n_experts).float()
    loads, first_loads = counts / counts.sum(-1, keepdim=True), first / first.sum(-1, keepdim=True)
    return {"per_layer": _rounded(loads), "mean": _rounded([loads.mean(0)])[0],
            "effective_experts_per_layer": [round(effective_experts(load), 3) for load in loads],
            "first_choice_per_layer": _rounded(first_loads),
            "first_choice_effective_experts_per_layer": [round(effective_experts(f), 3) for f in first_loads],
            "top_k": config.top_k, "router_norm": config.router_norm}


def rounded_window_losses(model: Decoder, windows: torch.Tensor) -> list[float]:
    """``window_losses`` as plain numbers for eval.json (5 decimals: their mean still gives val_loss)."""
    return [round(float(v), 5) for v in window_losses(model, windows)]


def evaluate(model: Decoder, data: LabData, context: int) -> dict:
    ext = extrapolation(model, data, context)
    return {"val_loss": ext["loss_at"][str(context)], "val_loss_2x": ext["loss_at"][str(2 * context)],
            "val_loss_4x": ext["loss_at"][str(4 * context)], "extrapolation": ext,
            "val_tokens": len(data.val), "expert_load": routing_load(model, data, context),
            "probes": probes(model, data, context),
            "val_window_losses": rounded_window_losses(model, data.val_windows(context))}
