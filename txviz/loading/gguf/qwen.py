"""Qwen in GGUF: llama.cpp's archs ``qwen2``, ``qwen3`` and ``qwen3moe`` (``convert_hf_to_gguf.py``:
``Qwen2Model``, ``Qwen3Model``, ``Qwen3MoeModel``).

All three run NEOX (rotate-half) RoPE in llama.cpp, so Q and K rows are written as Hugging Face has
them and nothing is undone. What each adds is found from the file's own tensors and keys by the common
reading: Qwen2's q/k/v biases (``attn_q.bias``), Qwen3's per-head RMSNorm on q and k before RoPE
(``attn_q_norm``/``attn_k_norm``, stored as plain weights, no +1) with a head size of its own
(``attention.key_length``), and Qwen3-MoE's experts (``expert_count``, ``expert_used_count``,
``expert_feed_forward_length``). Qwen3-MoE's router is a softmax over every expert, the top k kept and
renormalized to sum to one (llama.cpp's ``qwen3moe.cpp`` builds its MoE with weight normalization on,
and transformers' GGUF loader sets ``norm_topk_prob`` for it): ``router_norm="topk"``, as Mixtral.

Qwen2's sliding window is off in every released model and llama.cpp does not read one for qwen2.
"""

from __future__ import annotations

from typing import Any, Mapping

from txviz.loading.gguf.family import ArchKeys, GGUFFamily


def qwen3moe_fields(keys: ArchKeys, common: Mapping[str, Any]) -> dict[str, Any]:
    return {"router_norm": "topk"}


QWEN2 = GGUFFamily("qwen2")
QWEN3 = GGUFFamily("qwen3")
QWEN3MOE = GGUFFamily("qwen3moe", fields=qwen3moe_fields)
