"""The published quantization of a checkpoint, read from its config.json's ``quantization_config``: how many
bits each group of parameters (txviz.geometry.params.GROUPS) takes on disk and in GPU memory, so that a
model published in fp8 or mxfp4 is sized as it is served, not as if it were bf16.

Schemes, as transformers' quantizers store them:

- ``fp8`` (DeepSeek-V3): 8-bit weights in the attention projections, MLPs and experts, with one fp32
  scale per ``weight_block_size`` block (128×128: 32 bits per 16,384 weights);
- ``mxfp4`` (gpt-oss): the routed experts only, 4-bit values with one 8-bit scale per 32 (4.25 bits);
  ``modules_to_not_convert`` lists what stays in the checkpoint's dtype;
- ``bitsandbytes``: every linear layer but the output head, 4-bit (NF4/FP4, one fp32 absmax per 64
  weights, or with double quantization an 8-bit absmax and one fp32 per 256 of those) or 8-bit (LLM.int8;
  its per-row scales are left out, under 0.1 %);
- ``gptq`` / ``awq``: the decoder layers' linear weights at ``bits`` with an fp16 scale and a packed zero
  point per ``group_size`` weights; routers stay.

What a scheme leaves alone (embeddings, the output head, norms, biases, and routers unless said) keeps the
checkpoint's ``torch_dtype`` (bf16 when unset). Any other ``quant_method`` is not read: a note says so and
the weights are sized at the dtype the user picks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from txviz.geometry.fields import GeometryError

FLOAT_BITS = {"float32": 32, "float16": 16, "bfloat16": 16}
LAYER_LINEARS = ("attention", "mlp", "experts")  # what GPTQ, AWQ and fp8 quantize
GROUP_WORDS = {"embeddings": "embeddings and output head", "attention": "attention projections", "mlp": "MLPs",
               "experts": "routed experts", "router": "routers", "small": "norms and biases"}


@dataclass(frozen=True)
class WeightFormat:
    """Bits per parameter of each group, and the scheme's name and coverage in words."""

    scheme: str
    bits: tuple[tuple[str, float], ...]
    assumption: str

    def bytes_of(self, groups: Mapping[str, int]) -> int:
        bits = dict(self.bits)
        return math.ceil(sum(count * bits[group] for group, count in groups.items()) / 8)


def _whole(config: dict, key: str, default: int, low: int, high: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not (low <= value <= high or value == -1 == default):
        raise GeometryError(f"config.json: quantization_config.{key} must be a whole number from {low} to {high}, "
                            f"got {str(value)[:40]!r}")
    return value


def _fp8(config: dict) -> tuple[str, dict[str, float], str]:
    block = config.get("weight_block_size")
    if block is None:
        return "fp8", dict.fromkeys(LAYER_LINEARS, 8.0), "one scale per tensor"
    if not isinstance(block, list) or len(block) != 2 or \
            not all(isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= 1 << 16 for b in block):
        raise GeometryError(f"config.json: quantization_config.weight_block_size must be two whole numbers, "
                            f"got {str(block)[:40]!r}")
    return "fp8", dict.fromkeys(LAYER_LINEARS, 8 + 32 / (block[0] * block[1])), \
        f"one fp32 scale per {block[0]}×{block[1]} block"


def _mxfp4(config: dict) -> tuple[str, dict[str, float], str]:
    kept = config.get("modules_to_not_convert") or []
    said = f"not converted: {', '.join(map(str, kept))[:200]}" if isinstance(kept, list) and kept else ""
    return "mxfp4", {"experts": 4 + 8 / 32}, "4-bit values, one 8-bit scale per 32" + (f"; {said}" if said else "")


def _bitsandbytes(config: dict) -> tuple[str, dict[str, float], str] | None:
    covered = ("attention", "mlp", "experts", "router")
    if config.get("load_in_4bit"):
        kind = str(config.get("bnb_4bit_quant_type", "fp4"))[:8]
        double = bool(config.get("bnb_4bit_use_double_quant"))
        bits = 4 + (8 / 64 + 32 / (64 * 256) if double else 32 / 64)
        return f"bitsandbytes 4-bit ({kind})", dict.fromkeys(covered, bits), \
            "one absmax per 64 weights" + (" (double-quantized)" if double else " (fp32)")
    if config.get("load_in_8bit"):
        return "bitsandbytes 8-bit", dict.fromkeys(covered, 8.0), "per-row scales not counted"
    return None


def _grouped(config: dict, method: str) -> tuple[str, dict[str, float], str]:
    bits = _whole(config, "bits" if "bits" in config else "w_bit", 4, 2, 8)
    group = _whole(config, "group_size" if "group_size" in config else "q_group_size", 128, 1, 1 << 16)
    per = (16 + bits) / group if group > 0 else 0.0  # an fp16 scale and a packed zero point per group
    return f"{method} {bits}-bit", dict.fromkeys(LAYER_LINEARS, bits + per), \
        f"an fp16 scale and a zero point per {group} weights" if group > 0 else "one scale per output channel"


SCHEMES = {"fp8": _fp8, "mxfp4": _mxfp4, "bitsandbytes": _bitsandbytes,
           "gptq": lambda c: _grouped(c, "gptq"), "awq": lambda c: _grouped(c, "awq")}


def read_quantization(raw: dict, groups: Mapping[str, int]) -> tuple[WeightFormat | None, str | None]:
    """(the weights' published format or None, a note when a quantization_config is there but not read);
    ``groups``: the model's parameters per group, so that its assumption names only groups it has."""
    config = raw.get("quantization_config")
    if config is None:
        return None, None
    if not isinstance(config, dict):
        raise GeometryError(f"config.json: quantization_config must be an object, got {type(config).__name__}")
    method = config.get("quant_method", "bitsandbytes" if config.get("load_in_4bit") or config.get("load_in_8bit")
                        else None)
    read = SCHEMES.get(method) if isinstance(method, str) else None
    found = read(config) if read else None
    if found is None:
        return None, f"quantization_config ({str(method)[:40]}) is not read: weights are sized at the dtype chosen"
    scheme, bits, detail = found
    dtype = raw.get("torch_dtype", raw.get("dtype", "bfloat16"))
    rest = FLOAT_BITS.get(dtype if isinstance(dtype, str) else "", 16)
    quantized = [GROUP_WORDS[g] for g in GROUP_WORDS if g in bits and groups.get(g)]
    kept = [GROUP_WORDS[g] for g in GROUP_WORDS if g not in bits and groups.get(g)]
    rest_name = dtype if dtype in FLOAT_BITS else "bfloat16"
    assumption = (f"Published as {scheme}: {', '.join(quantized)} quantized ({detail}); "
                  f"{', '.join(kept)} stay {rest_name}.")
    return WeightFormat(scheme, tuple((g, bits.get(g, float(rest))) for g in GROUP_WORDS), assumption), None
