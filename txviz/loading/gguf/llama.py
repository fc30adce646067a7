"""The llama architecture in GGUF (also Mistral and Mixtral, which llama.cpp writes as "llama"), and the
one transform it needs: llama.cpp's Q/K row permutation, undone.

llama.cpp's converter (``convert_hf_to_gguf.py``, ``LlamaModel.permute``) reorders the rows of each Q and K
head so that RoPE can rotate *adjacent* pairs; txviz, like the Hugging Face reference, rotates pairs
(i, i + D/2). The rows are put back — transformers' ``reverse_permute_weights`` does the same — or every
attention map would be silently wrong. The architectures llama.cpp runs with NEOX (rotate-half) RoPE
(Qwen, Phi-3, Gemma) are written unpermuted.
"""

from __future__ import annotations

import torch

from txviz.loading.errors import ModelLoadError
from txviz.loading.gguf.family import GGUFFamily


def unpermute_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's Q/K row permutation, head by head.

    llama.cpp writes, per head, rows (0, D/2, 1, D/2+1, …) so that rows 2j, 2j+1 form a RoPE pair; the
    reference layout has the pair at rows (j, j + D/2). Works on weights (rows, in) and biases (rows,).
    Use ``n_heads`` for q and ``n_kv_heads`` for k.
    """
    rows = weight.shape[0]
    if rows % (2 * n_heads):
        raise ModelLoadError(f"cannot unpermute {rows} rows into {n_heads} heads of RoPE pairs")
    pairs = rows // n_heads // 2
    # (H, D/2, 2, …): stored as pair j's two members side by side; swap to (H, 2, D/2, …): halves
    return weight.reshape(n_heads, pairs, 2, *weight.shape[1:]).transpose(1, 2).reshape(weight.shape)


LLAMA = GGUFFamily("llama", permuted=True)
