"""What every tab of the Positions page reads: the model and prompt picked in the sidebar, the
prompt's tokens as shown, and the layer and head picked above the tabs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PositionsView:
    source: str  # the model's source, the key of its cached traces
    loaded: object  # LoadedModel
    traced: object  # PromptTrace of the prompt (attention probabilities)
    prompt: str
    bos: str
    tokens: list[str]  # as shown: characters split over tokens shown whole
    layer: int
    head: int

    @property
    def config(self):
        return self.loaded.config

    @property
    def labels(self) -> list[str]:
        """"position:token", for pickers and axes."""
        return [f"{i}:{t}" for i, t in enumerate(self.tokens)]
