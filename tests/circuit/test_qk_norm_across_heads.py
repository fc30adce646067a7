"""A QK-norm across all heads (OLMo 2, OLMoE) in the graph run: each head's query and key come from its
own input copy through every head's rows, so a patched input moves that head's query or key alone."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.circuit_variants import CIRCUIT_VARIANTS
from tests.helpers.tiny import random_decoder, tiny_config
from txviz.circuit.runner import heads_qkv

LAYER, T = 1, 7


def _model_query_and_key(model, x: torch.Tensor, ctx) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's own rotated queries (1, H, T, D) and keys (1, Hkv, T, D) of the residual ``x`` (1, T, d)."""
    layer, config = model.layers[LAYER], model.config
    attn, normed = layer.attn, layer.attn_norm(x)
    q = attn.q_norm(attn.q_proj(normed).view(1, T, config.n_heads, config.head_dim).transpose(1, 2))
    k = attn.k_norm(attn.k_proj(normed).view(1, T, config.n_kv_heads, config.head_dim).transpose(1, 2))
    return ctx.rotate(q), ctx.rotate(k)


@pytest.mark.parametrize("variant", ["olmo2_like", "olmoe_like"])
@torch.no_grad()
def test_a_patched_query_or_key_input_moves_that_heads_query_or_key_alone(variant):
    model = random_decoder(tiny_config(**CIRCUIT_VARIANTS[variant]))
    config, layer = model.config, model.layers[LAYER]
    h, groups = config.n_heads, config.n_groups
    assert groups > 1  # two query heads share each KV head: the key side must keep group mates apart
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, T, config.d_model, generator=generator)
    change = torch.randn(1, T, config.d_model, generator=generator)
    positions = torch.arange(T)
    ctx = model.layer_context(LAYER, positions, positions, x.dtype)
    copies = x[:, None].expand(-1, 3 * h, -1, -1).contiguous()  # (1, 3H, T, d): no edge patched
    query_head, key_head = 2, 3  # key_head's KV head is shared with head 2
    patched = copies.clone()
    patched[:, query_head] += change  # head 2's query input
    patched[:, h + key_head] += change  # head 3's key input

    q, k, v = heads_qkv(layer, ctx, copies, across_heads=True)
    q_patched, k_patched, v_patched = heads_qkv(layer, ctx, patched, across_heads=True)

    model_q, model_k = _model_query_and_key(model, x, ctx)
    assert_close(q, model_q, atol=1e-6, rtol=0)  # unpatched: the model's own queries and keys
    assert_close(k, model_k.repeat_interleave(groups, dim=1), atol=1e-6, rtol=0)
    others = [i for i in range(h) if i != query_head]
    assert torch.equal(q_patched[:, others], q[:, others])
    assert torch.equal(v_patched, v)
    key_others = [i for i in range(h) if i != key_head]
    assert torch.equal(k_patched[:, key_others], k[:, key_others])  # head 2 shares the KV head and keeps its key
    # the patched head's query and key: the model's own of the changed input, through the whole norm
    changed_q, changed_k = _model_query_and_key(model, x + change, ctx)
    assert_close(q_patched[:, query_head], changed_q[:, query_head], atol=1e-6, rtol=0)
    assert_close(k_patched[:, key_head], changed_k[:, key_head // groups], atol=1e-6, rtol=0)
    assert (q_patched[:, query_head] - q[:, query_head]).abs().max() > 1e-2
    assert (k_patched[:, key_head] - k[:, key_head]).abs().max() > 1e-2
