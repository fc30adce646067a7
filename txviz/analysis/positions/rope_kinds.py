"""RoPE per layer kind: models whose sliding (local) layers rotate with their own base beside the
global layers' (Gemma 3: θ = 10 000 on the 5-of-6 local layers with a 512-token window, 1 000 000 on
every sixth, global layer). Which layers use which base, and what the two bases mean: each pair's
wavelength 2π/θ_i, and how many pairs turn at least once inside the window or the context.

The tables come from a trace (``rope_angles`` and ``rope_local_angles`` are what the layers multiply
into q and k, txviz.capture.trace): at position 1 the angle of pair i is θ_i itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from txviz.config import ModelConfig, RopeScaling
from txviz.model.positions import rope_inv_freq


@dataclass(frozen=True)
class RopeKind:
    name: str  # "local (sliding)" or "global (full)"
    theta: float
    window: int | None  # tokens a layer of the kind sees; None: the whole context
    layers: tuple[int, ...]


def has_two_rope_bases(config: ModelConfig) -> bool:
    """True when some sliding layers rotate with a base of their own (``rope_local_theta``)."""
    return (config.positions == "rope" and config.rope_local_theta is not None
            and any(config.is_sliding(i) for i in range(config.n_layers))
            and any(not config.is_sliding(i) for i in range(config.n_layers)))


def rope_kinds(config: ModelConfig) -> tuple[RopeKind, ...]:
    """The model's layer kinds with their base and window, local first."""
    local = tuple(i for i in range(config.n_layers) if config.is_sliding(i))
    full = tuple(i for i in range(config.n_layers) if not config.is_sliding(i))
    kinds = []
    if local:
        kinds.append(RopeKind("local (sliding)", config.layer_rope_theta(local[0]), config.sliding_window, local))
    if full:
        kinds.append(RopeKind("global (full)", config.rope_theta, None, full))
    return tuple(kinds)


def layer_inv_freq(config: ModelConfig, layer: int) -> torch.Tensor:
    """θ_i of the pairs as layer ``layer`` uses them: sliding layers with their own base are unscaled
    (as the Decoder builds them), every other layer takes the config's scaling."""
    if has_two_rope_bases(config) and config.is_sliding(layer):
        return rope_inv_freq(config.rope_dims, config.rope_local_theta, RopeScaling())[0]
    return rope_inv_freq(config.rope_dims, config.rope_theta, config.rope_scaling)[0]  # partial rotary: R/2 pairs


def layer_span(config: ModelConfig, layer: int) -> int:
    """The farthest distance (tokens) layer ``layer`` can see: its window on a sliding layer, else the
    context. A pair whose wavelength is longer never completes a turn within what that layer attends to."""
    window = config.layer_window(layer)
    return config.max_seq_len if window is None else min(window, config.max_seq_len)


def inv_freq_from_angles(angles: torch.Tensor) -> torch.Tensor:
    """θ_i read back from a recorded angle table (T ≥ 2, D/2): the angle at position 1."""
    if angles.shape[0] < 2:
        raise ValueError("the angle table needs at least two positions to read θ_i back")
    return angles[1].double()


def turning_pairs(inv_freq: torch.Tensor, span: int) -> int:
    """How many pairs complete at least one full turn within ``span`` tokens (wavelength ≤ span)."""
    return int((2 * math.pi / inv_freq <= span).sum())


def angle_gap_at(inv_freq_a: torch.Tensor, inv_freq_b: torch.Tensor, distance: int) -> torch.Tensor:
    """Per pair, the angle (rad, unwrapped) each base rotates over ``distance`` tokens, stacked (2, D/2)."""
    return torch.stack([inv_freq_a.double() * distance, inv_freq_b.double() * distance])
