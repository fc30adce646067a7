"""MXFP4 weights (OCP Microscaling Formats v1.0, 2023), as OpenAI's gpt-oss checkpoints store their experts.

A block of 32 values shares one scale: each value is a 4-bit float E2M1 (sign, 2 exponent bits, 1 mantissa
bit: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}), the scale an 8-bit power of two E8M0 with bias 127. A tensor W (…, R, C)
is stored as ``<name>_blocks`` (…, R, C/32, 16) uint8, two values a byte, the low nibble first, and
``<name>_scales`` (…, R, C/32) uint8: W[…, r, 32g + i] = FP4[nibble i of block g] · 2^(scale[…, r, g] − 127).
gpt-oss stores its experts' matrices with rows = output features, the transpose of the x·W layout of its
unquantized checkpoints, so the dequantized tensor is transposed back (as transformers' integrations/mxfp4.py
does). Dequantization is exact: every FP4 value times a power of two is a float32.
"""

from __future__ import annotations

import torch

from txviz.loading.errors import ModelLoadError

QUANT_METHOD = "mxfp4"
NOTE = ("The experts' weights are stored in MXFP4 (4-bit values, a power-of-two scale per 32): they were "
        "dequantized exactly at load, so the model runs them at the dtype shown.")
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
BLOCK_BYTES = 16  # 32 values


def dequantize(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(…, R, G, 16) uint8 blocks and (…, R, G) uint8 scales → (…, R, 32·G) float32."""
    if blocks.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ModelLoadError(f"MXFP4 blocks and scales must be uint8, got {blocks.dtype} and {scales.dtype}")
    if blocks.shape[-1] != BLOCK_BYTES or tuple(blocks.shape[:-1]) != tuple(scales.shape):
        raise ModelLoadError(f"MXFP4 blocks {tuple(blocks.shape)} do not match scales {tuple(scales.shape)}: "
                             f"expected blocks (…, G, {BLOCK_BYTES}) beside scales (…, G)")
    table = torch.tensor(FP4_VALUES, dtype=torch.float32, device=blocks.device)
    values = torch.stack([table[(blocks & 0x0F).long()], table[(blocks >> 4).long()]], dim=-1)  # (…, G, 16, 2)
    values = values.flatten(-2)  # (…, G, 32): low nibble, high nibble, next byte …
    exponent = scales.to(torch.int32) - 127  # (…, G)
    return torch.ldexp(values, exponent[..., None]).flatten(-2)  # (…, R, 32·G)


def dequantize_experts(tensors: dict, config) -> dict:
    """Every ``<name>_blocks``/``<name>_scales`` pair replaced by ``<name>`` in float32, transposed to the
    unquantized checkpoints' x·W layout; a half of a pair alone is refused by name."""
    out = {}
    for name, tensor in tensors.items():
        if name.endswith("_scales") and name.removesuffix("_scales") + "_blocks" in tensors:
            continue
        if not name.endswith("_blocks"):
            if name.endswith("_scales"):
                raise ModelLoadError(f"{name} has no {name.removesuffix('_scales')}_blocks beside it")
            out[name] = tensor
            continue
        base = name.removesuffix("_blocks")
        if base + "_scales" not in tensors:
            raise ModelLoadError(f"{name} has no {base}_scales beside it")
        out[base] = dequantize(tensor, tensors[base + "_scales"]).transpose(-1, -2)
    return out
