"""OLMoE in GGUF: llama.cpp's arch ``olmoe`` (``convert_hf_to_gguf.py``: ``OlmoeModel``).

Llama's block with NEOX (rotate-half) RoPE, so Q and K rows are written unpermuted, and an RMSNorm on q and
on k *across all heads at once* (``attn_q_norm`` is n_heads·D wide, ``attn_k_norm`` n_kv_heads·D), before
RoPE: ``qk_norm_scope="all_heads"``. Every layer's FFN is routed experts stacked (E, out, in),
``feed_forward_length`` wide; the router is a softmax over every expert with the top k kept as they are,
not renormalised (llama.cpp's ``olmoe.cpp`` builds its MoE with weight normalization off; transformers'
``norm_topk_prob`` False): ``router_norm="all"``. transformers' GGUF loader has no ``olmoe``.
"""

from __future__ import annotations

from typing import Any, Mapping

from txviz.loading.gguf.family import ArchKeys, GGUFFamily


def olmoe_fields(keys: ArchKeys, common: Mapping[str, Any]) -> dict[str, Any]:
    return {"router_norm": "all", "qk_norm_scope": "all_heads"}


OLMOE = GGUFFamily("olmoe", fields=olmoe_fields)
