"""What every tab of the Design tradeoffs page reads: the loaded model, the dtype its KV cache would
have, and the zoo's base config (None while the zoo has not trained it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TradeoffsView:
    source: str  # the loaded model's source, the key of its measurements
    loaded: object  # LoadedModel
    dtype_name: str  # "fp32" or "bf16": the loaded model's KV cache
    zoo_base: object | None  # ModelConfig of the zoo's base, or None

    @property
    def config(self):
        return self.loaded.config
