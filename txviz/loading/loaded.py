"""LoadedModel: what every loader returns — the stateless model, its tokenizer, and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from txviz.config import ModelConfig


@dataclass(frozen=True)
class LoadedModel:
    model: "torch.nn.Module"  # txviz.model.Decoder, in eval mode
    tokenizer: object | None  # txviz.loading.tokenizer.tokenizer.Tokenizer (None for config-only tiny models)
    config: ModelConfig
    source: str  # the path or name it was loaded from
    format: str  # "gguf" | "hf" | "safetensors"
    metadata: dict = field(default_factory=dict)  # quantization types, architecture, chat template…

    @property
    def device(self) -> torch.device:
        """Where the model runs, or, spread over several devices, where it takes its input."""
        from txviz.model.placement import compute_device
        return compute_device(self.model)

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())
