"""Phi-3 in GGUF: llama.cpp's arch ``phi3`` (``convert_hf_to_gguf.py``: ``Phi3MiniModel``).

Two fused tensors per layer, as in the Hugging Face checkpoint: ``attn_qkv`` stacks the rows of q, k and v
(n_heads·D, then n_kv_heads·D twice), ``ffn_up`` the gate's rows, then the up projection's; they are
split by rows into txviz's separate weights. RoPE is NEOX-style (no Q/K permutation) on the first
``rope.dimension_count`` dimensions of each head (partial rotary, Phi-4-mini).

``phi3.attention.sliding_window`` is read by neither runtime: llama.cpp's ``llama-model.cpp`` turns
Phi-3's window off ("Phi SWA is currently disabled") and transformers' GGUF loader has no key for it, so
a Phi-3 GGUF attends over its whole context here too. LongRoPE's ``rope_factors_long``/``_short`` tensors
have no place in txviz's RoPE: such a file is refused naming LongRoPE (``txviz.loading.gguf.rope_freqs``).
"""

from __future__ import annotations

from txviz.loading.gguf.family import GGUFFamily

PHI3_FUSED = {  # blk.{i}.<key> → layers.{i}.<parts>, stacked by rows in this order
    "attn_qkv.weight": ("attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight"),
    "ffn_up.weight": ("ffn.gate_proj.weight", "ffn.up_proj.weight"),
}

PHI3 = GGUFFamily("phi3", fused=PHI3_FUSED, partial_rotary=True)
