"""Train a tiny Decoder on the story corpus on a CPU in minutes: AdamW, warmup + cosine, seeded.

    result = train(config, prepare_data(CorpusSettings()), TrainSettings(steps=1000))
    result.model, result.curves        # the trained Decoder (eval mode) and what curves.json holds

The loss is next-token cross-entropy over windows of ``context`` tokens. MoE models add the
Switch/GShard load-balancing loss (txviz.lab.balancing) times ``aux_weight``, averaged over the MoE
layers; its value is logged at every step even when its weight is 0, so an unbalanced run shows the
imbalance it does not fight. The router logits reach the loss through a LiveRecorder (the model's
own capture protocol, without detaching). Everything random is seeded: ``torch.manual_seed(seed)``
for the initialization and a ``torch.Generator`` seeded with ``seed`` for the data order.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from txviz.config import ModelConfig
from txviz.lab.balancing import load_balancing_loss
from txviz.lab.data import LabData
from txviz.lab.recorder import LiveRecorder
from txviz.model import Decoder

INIT_STD = 0.02  # GPT-2's initialization (Radford et al. 2019)


@dataclass(frozen=True)
class TrainSettings:
    steps: int = 1000
    batch_size: int = 16
    context: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # the cosine ends at lr × this
    warmup_fraction: float = 0.05
    weight_decay: float = 0.1  # on matrices and embeddings, not on norms
    grad_clip: float = 1.0
    aux_weight: float = 0.0  # load-balancing loss weight (Switch uses 0.01); MoE only
    router_init_std: float = 0.02  # MoE router weights; larger starts the routing further from uniform
    router_lr_scale: float = 1.0  # MoE routers learn at lr × this
    seed: int = 0
    log_every: int = 25

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StepReport:
    """What the progress callback gets every ``log_every`` steps (and at the last step)."""

    step: int  # 1-based
    steps: int
    loss: float  # cross-entropy of this step's batch
    aux_loss: float | None  # load-balancing loss (MoE only)
    lr: float
    tokens_per_second: float  # since the start of training
    seconds: float


@dataclass
class TrainResult:
    model: Decoder
    curves: dict = field(default_factory=dict)


def init_weights(model: Decoder, router_std: float = INIT_STD) -> None:
    """N(0, 0.02) for every matrix and embedding, N(0, 0.02/√(2L)) for the projections that write
    into the residual stream (GPT-2), N(0, ``router_std``) for MoE routers, ones for norm weights,
    zeros for biases."""
    residual_std = INIT_STD / math.sqrt(2 * model.config.n_layers)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(param)
            elif "norm" in name:
                nn.init.ones_(param)
            else:
                std = residual_std if name.endswith(("o_proj.weight", "down_proj.weight")) else INIT_STD
                std = router_std if name.endswith("router.weight") else std
                nn.init.normal_(param, std=std)


def lr_at(step: int, s: TrainSettings) -> float:
    """Linear warmup to ``lr``, then a cosine down to ``lr · min_lr_ratio`` at the last step."""
    warmup = max(1, round(s.warmup_fraction * s.steps))
    if step < warmup:
        return s.lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, s.steps - 1 - warmup)
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def _group_of(name: str, param: torch.Tensor) -> str:
    if name.endswith("router.weight"):
        return "router"
    return "decay" if param.dim() >= 2 and "norm" not in name else "no_decay"


def make_optimizer(model: Decoder, s: TrainSettings) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices and embeddings; MoE routers get ``router_lr_scale`` × the
    learning rate and no decay. Each group's ``lr_scale`` is applied by the schedule."""
    params: dict[str, list] = {"decay": [], "no_decay": [], "router": []}
    for name, param in model.named_parameters():
        params[_group_of(name, param)].append(param)
    settings = {"decay": (s.weight_decay, 1.0), "no_decay": (0.0, 1.0), "router": (0.0, s.router_lr_scale)}
    groups = [{"params": params[g], "weight_decay": wd, "lr_scale": scale}
              for g, (wd, scale) in settings.items() if params[g]]
    return torch.optim.AdamW(groups, lr=s.lr, betas=(0.9, 0.95))


def losses(model: Decoder, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(cross-entropy, mean load-balancing loss over MoE layers or None) of one batch."""
    recorder = LiveRecorder(("router_logits", "expert_ids"), model.config.n_layers)  # a dense model offers neither
    logits = model(x, record=recorder)  # (B, T, V)
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
    if not model.config.is_moe:
        return ce, None
    per_layer = [load_balancing_loss(l, e) for l, e in zip(recorder["router_logits"], recorder["expert_ids"])]
    return ce, torch.stack(per_layer).mean()


def _step(model: Decoder, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
          s: TrainSettings) -> tuple[float, float | None]:
    """One AdamW update on the batch; (cross-entropy, load-balancing loss or None) before it."""
    ce, aux = losses(model, x, y)
    loss = ce if aux is None else ce + s.aux_weight * aux
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip)
    optimizer.step()
    return ce.item(), None if aux is None else aux.item()


def train(config: ModelConfig, data: LabData, settings: TrainSettings,
          progress: Callable[[StepReport], None] | None = None) -> TrainResult:
    torch.manual_seed(settings.seed)
    model = Decoder(config)
    init_weights(model, settings.router_init_std)
    model.train()
    optimizer = make_optimizer(model, settings)
    order = torch.Generator().manual_seed(settings.seed)
    tokens_per_step = settings.batch_size * settings.context
    curve, aux_curve, lrs = [], [], []
    started = time.perf_counter()
    for step in range(settings.steps):
        lr = lr_at(step, settings)
        for group in optimizer.param_groups:
            group["lr"] = lr * group["lr_scale"]
        ce, aux = _step(model, optimizer, *data.batch(order, settings.batch_size, settings.context), settings)
        curve.append(round(ce, 5))
        aux_curve.append(None if aux is None else round(aux, 5))
        lrs.append(float(f"{lr:.6g}"))
        if progress is not None and ((step + 1) % settings.log_every == 0 or step + 1 == settings.steps):
            seconds = time.perf_counter() - started
            progress(StepReport(step + 1, settings.steps, ce, aux, lr,
                                (step + 1) * tokens_per_step / seconds, seconds))
    seconds = time.perf_counter() - started
    tokens = settings.steps * tokens_per_step
    curves = {"loss": curve, "aux_loss": aux_curve, "lr": lrs, "tokens": tokens, "seconds": round(seconds, 3),
              "tokens_per_second": round(tokens / seconds, 1), "seed": settings.seed,
              "train_settings": settings.to_dict(), "corpus": data.settings.to_dict()}
    return TrainResult(model.eval(), curves)
