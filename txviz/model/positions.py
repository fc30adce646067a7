"""How a decoder knows word order: RoPE, ALiBi, learned absolute embeddings, or nothing.

Every scheme answers the same three questions, so attention never asks which one it has:
  * ``add_to_embeddings(x, positions)``: absolute schemes add a vector per position (GPT-2);
  * ``rotation(positions)``: RoPE's (cos, sin) for rotating q and k, or None;
  * ``bias(q_pos, k_pos)``: ALiBi's additive score bias (H, T, S), or None.

RoPE (Su et al. 2021) rotates each pair (x_i, x_{i+D/2}) of a head by the angle m·θ_i with
θ_i = base^(−2i/D) (the "rotate-half" pairing of the reference Llama code). Because rotations compose,
q_m·k_n depends only on m − n. Partial rotary (GPT-NeoX, Phi): D is ``rotary_dims``, the first dims of
each head; the rest pass through unrotated. ALiBi (Press et al. 2022) adds −slope_h·(i − j) to the score
of query i and key j, with geometric per-head slopes. BLOOM adds slope_h·j and MPT slope_h·(j − S + 1):
each differs from −slope_h·(i − j) by a constant along a row, so softmax gives the same weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from txviz.config import ModelConfig, RopeScaling


# ---- RoPE ---------------------------------------------------------------------------------------
def rope_inv_freq(head_dim: int, theta: float, scaling: RopeScaling) -> tuple[torch.Tensor, float]:
    """Per-pair angular frequencies θ_i (D/2,) and the attention scaling applied to cos/sin."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").float() / head_dim
    if scaling.kind == "ntk":  # NTK-aware: stretch the base, not the positions
        theta = theta * scaling.factor ** (head_dim / (head_dim - 2))
    inv_freq = 1.0 / (theta ** exponents)
    if scaling.kind == "linear":
        return inv_freq / scaling.factor, 1.0
    if scaling.kind == "llama3":
        return _llama3_inv_freq(inv_freq, scaling), 1.0
    if scaling.kind == "yarn":
        return _yarn_inv_freq(head_dim, theta, scaling)
    return inv_freq, 1.0


def _llama3_inv_freq(inv_freq: torch.Tensor, s: RopeScaling) -> torch.Tensor:
    """Llama 3.1: wavelengths longer than the original context are interpolated by ``factor``,
    short ones kept, a linear ramp (in 1/wavelength) in between."""
    old_len = s.original_max_seq_len
    low_freq_wavelen = old_len / s.low_freq_factor
    high_freq_wavelen = old_len / s.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq)
    smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor)
    smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def _yarn_inv_freq(dim: int, base: float, s: RopeScaling) -> tuple[torch.Tensor, float]:
    """YaRN (Peng et al. 2023): extrapolate fast pairs, interpolate slow ones, ramp between, and
    sharpen attention by 0.1·ln(factor) + 1."""

    def correction_dim(rotations: float) -> float:
        return dim * math.log(s.original_max_seq_len / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(s.beta_fast), correction_dim(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32, device="cpu") - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, device="cpu").float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (s.factor * pos_freqs)
    keep = 1 - ramp  # 1 where the pair is fast enough to extrapolate
    inv_freq = interpolation * (1 - keep) + extrapolation * keep
    attention = 0.1 * math.log(s.factor) + 1.0 if s.factor > 1 else 1.0
    return inv_freq, attention


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Rotate (B, H, T, D) by per-position (T, R) cos/sin: all of each head when R = D, else its first R
    dims (partial rotary, rotate-half within them) with the other D − R passed through. ``out``: where
    to write a whole-head rotation without gradients (a trace's slot for q_rot), else a new tensor."""
    rotary = cos.shape[-1]
    if rotary == x.shape[-1] and torch.is_grad_enabled() and any(t.requires_grad for t in (x, cos, sin)):
        return x * cos + rotate_half(x) * sin  # out= below has no gradient
    if rotary == x.shape[-1]:  # the same sum, laid out (B, H, T, D) whatever x's strides: q and k arrive
        # as transposed views of their projections, and attention would copy them into that layout again
        shape = torch.broadcast_shapes(x.shape, cos.shape)
        dtype = torch.promote_types(x.dtype, cos.dtype)
        if out is None or out.shape != shape or out.dtype != dtype or out.device != x.device:
            out = torch.empty(shape, dtype=dtype, device=x.device)
        torch.mul(x, cos, out=out)
        return out.add_(rotate_half(x) * sin)
    rotated, passed = x[..., :rotary], x[..., rotary:]
    return torch.cat((rotated * cos + rotate_half(rotated) * sin, passed), dim=-1)


class RoPE(nn.Module):
    """The frequencies are a plain float32 attribute, not a buffer: derived from the config (never
    loaded), and never cast by ``model.to(bfloat16)``, which would spoil the angles at long positions."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.inv_freq, self.attention_scaling = rope_inv_freq(config.rope_dims, config.rope_theta, config.rope_scaling)

    def add_to_embeddings(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        """m·θ_i for each position m and pair i: (T, D/2), in float32."""
        return positions.float()[:, None] * self.inv_freq.to(positions.device)[None, :]

    def rotation(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        emb = torch.cat([self.angles(positions)] * 2, dim=-1)  # (T, R): pair i is (i, i + R/2), R = rope_dims
        return emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> None:
        return None


# ---- ALiBi --------------------------------------------------------------------------------------
def alibi_slopes(n_heads: int, bias_max: float = 8.0) -> torch.Tensor:
    """Press et al. (2022): for 2^k heads the geometric sequence 2^(−max/n)^h, h = 1..n, max = 8;
    otherwise the slopes of the nearest lower power of two plus every other slope of the next one.
    BLOOM's (max 8) and MPT's (``alibi_bias_max``) are both this rule."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-bias_max / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(power_of_two(n_heads), device="cpu")
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(power_of_two(closest) + extra, device="cpu")


class ALiBi(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        # float32, derived from the config like RoPE's θ
        self.slopes = alibi_slopes(config.n_heads, config.alibi_bias_max)

    def add_to_embeddings(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x

    def rotation(self, positions: torch.Tensor) -> None:
        return None

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        distance = (q_pos[:, None] - k_pos[None, :]).float()  # (T, S)
        return -self.slopes.to(distance.device)[:, None, None] * distance  # (H, T, S)


# ---- absolute and none --------------------------------------------------------------------------
class LearnedPositions(nn.Module):
    """A trained vector per absolute position, added to the token embedding (GPT-2)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(config.max_seq_len, config.d_model))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """The rows of ``positions`` (T, d). A call, so a placement hook can bring an offloaded table."""
        return self.weight[positions]

    def add_to_embeddings(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x + self(positions).to(x.device)

    def rotation(self, positions: torch.Tensor) -> None:
        return None

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> None:
        return None


class NoPositions(nn.Module):
    """No position signal at all: attention is permutation-equivariant; only the causal
    mask breaks the symmetry."""

    def add_to_embeddings(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x

    def rotation(self, positions: torch.Tensor) -> None:
        return None

    def bias(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> None:
        return None


def make_positions(config: ModelConfig) -> nn.Module:
    schemes = {"rope": RoPE, "alibi": ALiBi, "learned": LearnedPositions, "none": lambda c: NoPositions()}
    return schemes[config.positions](config)
