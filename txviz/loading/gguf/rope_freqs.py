"""llama.cpp's per-pair RoPE frequency factors (``rope_freqs.weight``), read back as Llama 3.1's rope scaling.

A Llama 3.1/3.2/3.3 checkpoint says ``rope_scaling: {"rope_type": "llama3", factor, low_freq_factor,
high_freq_factor, original_max_position_embeddings}``. llama.cpp's converter (``convert_hf_to_gguf.py``,
``LlamaModel.generate_extra_tensors``) writes no metadata key for it: it evaluates the rule once and stores
one divisor per rotated pair, a float32 vector of ``rope_dims / 2`` values that llama.cpp divides each
frequency by — 1 for pairs whose wavelength is under ``original / high_freq_factor``, ``factor`` for those
over ``original / low_freq_factor``, ``1 / ((1 − s) / factor + s)`` between, s rising linearly in
``original / wavelength``. (Its ``original`` is the config's top-level ``original_max_position_embeddings``,
8192 when absent, as in every Llama 3.x config.)

The rule is read back from the divisors: ``factor`` is the largest, and ``low``/``high`` are the line
through the ramp's pairs (only ``original / low`` and ``original / high`` matter, so ``original`` is the
file's ``rope.scaling.original_context_length`` or the converter's 8192). With fewer than two pairs on the
ramp the line is not determined and the converter's defaults (1, 4) are tried. Whatever is read must give
back the file's divisors for every pair, or the file is refused: the model then runs with frequencies equal
to llama.cpp's, and txviz's pages name the scaling "llama3" with its numbers.

Phi-3's LongRoPE (Phi-3-mini-128k, Phi-3.5-mini) also stores per-pair factors, two sets
(``rope_factors_long``/``_short``, chosen by the sequence's length) with an attention factor; txviz's RoPE has
neither, as its safetensors loader says for the same checkpoints, so such a file is refused by that name.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from txviz.config import ConfigError, RopeScaling
from txviz.loading.errors import ModelLoadError

ROPE_FREQS = "rope_freqs.weight"
LONGROPE_FACTORS = ("rope_factors_long.weight", "rope_factors_short.weight")
CONVERTER_ORIGINAL_CONTEXT = 8192  # convert_hf_to_gguf.py's default for a config without the top-level key
CONVERTER_LOW_HIGH = (1.0, 4.0)  # its defaults for low_freq_factor, high_freq_factor
MAX_PAIRS = 4096  # a head of 8192 rotated dimensions; the vector is read before any size check
TOLERANCE = 1e-4  # relative: the file holds float32 divisors computed in float32


def _base_inv_freq(rope_dims: int, theta: float) -> np.ndarray:
    from txviz.model.positions import rope_inv_freq

    return rope_inv_freq(rope_dims, theta, RopeScaling())[0].double().numpy()


def _divisors_of(scaling: RopeScaling, rope_dims: int, theta: float) -> np.ndarray:
    from txviz.model.positions import rope_inv_freq

    return _base_inv_freq(rope_dims, theta) / rope_inv_freq(rope_dims, theta, scaling)[0].double().numpy()


def _ramp_line(factors: np.ndarray, x: np.ndarray, factor: float) -> tuple[float, float] | None:
    """(low, high) from the pairs strictly between 1 and ``factor``: s = (x − low) / (high − low)."""
    on_ramp = (factors > 1 + TOLERANCE) & (factors < factor * (1 - TOLERANCE))
    if on_ramp.sum() < 2:
        return None
    s = (1 / factors[on_ramp] - 1 / factor) / (1 - 1 / factor)
    slope, intercept = np.polyfit(x[on_ramp], s, 1)
    if not slope > 0:
        return None
    low = -intercept / slope
    return low, low + 1 / slope


def llama3_scaling(factors: Sequence[float], rope_dims: int, theta: float, original: int | None,
                   path: str = "") -> RopeScaling:
    """The ``RopeScaling`` whose frequencies are the base ones divided by ``factors`` (none when all are 1),
    or a ModelLoadError saying why the vector is not Llama 3's rule."""
    where = f"{path}: " if path else ""
    values = np.asarray(list(factors), dtype=np.float64)
    if values.shape != (rope_dims // 2,) or not np.all(np.isfinite(values)) or not np.all(values > 0):
        raise ModelLoadError(f"{where}tensor {ROPE_FREQS} must hold {rope_dims // 2} positive finite divisors "
                             f"(one per rotated pair), got {values.size} values")
    if np.allclose(values, 1.0, rtol=0, atol=TOLERANCE):
        return RopeScaling()
    factor = float(values.max())
    if values.min() < 1 - TOLERANCE:
        raise ModelLoadError(f"{where}tensor {ROPE_FREQS} speeds some pairs up (smallest divisor "
                             f"{values.min():.4g}); only Llama 3's rope scaling (divisors ≥ 1) is supported")
    original = original or CONVERTER_ORIGINAL_CONTEXT
    x = original / (2 * math.pi / _base_inv_freq(rope_dims, theta))
    fitted = _ramp_line(values, x, factor)
    candidates = [tuple(round(v, 4) for v in fitted), fitted] if fitted else [CONVERTER_LOW_HIGH]
    for low, high in candidates:
        try:
            scaling = RopeScaling("llama3", factor=factor, original_max_seq_len=int(original),
                                  low_freq_factor=float(low), high_freq_factor=float(high))
        except ConfigError:
            continue
        if np.allclose(_divisors_of(scaling, rope_dims, theta), values, rtol=TOLERANCE, atol=0):
            return scaling
    raise ModelLoadError(f"{where}tensor {ROPE_FREQS} holds divisors that are not Llama 3's rope scaling "
                         f"(factor {factor:.4g}); no other per-pair RoPE factors are supported")


def refuse_longrope(tensor_names, path: str = "") -> None:
    """A ModelLoadError naming LongRoPE when the file stores its long/short factors."""
    found = [name for name in LONGROPE_FACTORS if name in tensor_names]
    if found:
        where = f"{path}: " if path else ""
        raise ModelLoadError(f"{where}LongRoPE (tensors {', '.join(found)}: Phi-3-mini-128k, Phi-3.5-mini) is not "
                             "supported: txviz's RoPE has no long/short factor sets")


def read_rope_freqs(reader, dequantize_tensor: Callable[[Any], Any], path: str = "") -> tuple[float, ...] | None:
    """The file's ``rope_freqs.weight`` as floats, or None when it has none; refused before it is read when
    it is larger than any head. ``dequantize_tensor`` is the loader's (a tensor of the file → float32 values):
    handed in, so this module never imports the loader that imports it."""
    tensor = next((t for t in reader.tensors if t.name == ROPE_FREQS), None)
    if tensor is None:
        return None
    if int(tensor.n_elements) > MAX_PAIRS:
        where = f"{path}: " if path else ""
        raise ModelLoadError(f"{where}tensor {ROPE_FREQS} holds {int(tensor.n_elements):,} values, more than "
                             f"any head's {MAX_PAIRS} rotated pairs")
    return tuple(float(v) for v in dequantize_tensor(tensor).reshape(-1).tolist())
