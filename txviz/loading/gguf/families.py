"""The GGUF architectures txviz runs, by the name llama.cpp writes in ``general.architecture``; anything
else is refused by name with this list."""

from __future__ import annotations

from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf.family import GGUFFamily
from txviz.loading.gguf.gemma import GEMMA, GEMMA2, GEMMA3
from txviz.loading.gguf.llama import LLAMA
from txviz.loading.gguf.olmoe import OLMOE
from txviz.loading.gguf.phi3 import PHI3
from txviz.loading.gguf.qwen import QWEN2, QWEN3, QWEN3MOE
from txviz.loading.gguf.qwen2moe import QWEN2MOE

FAMILIES: dict[str, GGUFFamily] = {f.architecture: f for f in (LLAMA, QWEN2, QWEN3, QWEN2MOE, QWEN3MOE, PHI3,
                                                                GEMMA, GEMMA2, GEMMA3, OLMOE)}
SUPPORTED_ARCHITECTURES = tuple(FAMILIES)


def family_of(architecture: str, path: str = "") -> GGUFFamily:
    if architecture not in FAMILIES:
        where = f"{path}: " if path else ""
        raise ModelLoadError(f"{where}GGUF architecture {str(architecture)[:60]!r} is not supported; "
                             f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}")
    return FAMILIES[architecture]
