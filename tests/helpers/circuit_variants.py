"""Tiny configs for the circuit tests: every variant of tests.helpers.tiny plus the choices whose
graph runs differ most (Gemma's sandwich norms with QK-norm and soft caps, the parallel block with
partial rotary, an embedding norm)."""

from __future__ import annotations

from tests.helpers.tiny import FAMILY_VARIANTS, VARIANTS

CIRCUIT_VARIANTS: dict[str, dict] = {
    **VARIANTS,
    "gemma_like": FAMILY_VARIANTS["gemma_sandwich_capped"],
    "parallel": FAMILY_VARIANTS["parallel_partial_rotary"],
    "embed_norm": FAMILY_VARIANTS["embed_norm_alibi"],
}
