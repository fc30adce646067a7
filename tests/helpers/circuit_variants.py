"""Tiny configs for the circuit tests: every variant of tests.helpers.tiny plus the choices whose
graph runs differ most (Gemma's sandwich norms with QK-norm and soft caps, the parallel block with
partial rotary, an embedding norm)."""

from __future__ import annotations

from tests.helpers.tiny import VARIANTS

CIRCUIT_VARIANTS: dict[str, dict] = {
    **VARIANTS,
    "gemma_like": dict(sandwich_norm=True, qk_norm=True, n_kv_heads=2, attn_softcap=5.0, final_softcap=30.0,
                       embed_scale=3.0, query_scale=0.3, ffn="geglu"),
    "parallel": dict(parallel_block=True, rotary_dims=4, n_kv_heads=2),
    "embed_norm": dict(embed_norm=True, norm="layernorm", positions="alibi"),
}
