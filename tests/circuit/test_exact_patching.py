"""Exact edge patching: the graph run reproduces the model, fully patched the corrupt run, and one
patched edge is the model run with that one node's input recomputed by hand."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.circuit_variants import CIRCUIT_VARIANTS
from tests.helpers.tiny import random_decoder, random_ids, tiny_config
from txviz.causal.activations import run_with_activations
from txviz.causal.intervention import Intervention, Replace
from txviz.circuit.metric import LogitDiff, LogProb
from txviz.circuit.pair import CircuitPair
from txviz.circuit.patching import faithfulness, faithfulness_curve, patched_metric, smallest_circuit, top_edges
from txviz.circuit.qk import _OneLayer
from txviz.circuit.runner import run_graph
from txviz.model.positions import apply_rotary


def _pair(variant: str, metric=LogitDiff(3, 5), n_tokens: int = 10):
    model = random_decoder(tiny_config(**CIRCUIT_VARIANTS[variant]))
    clean = random_ids(model.config, n_tokens, seed=1)
    corrupt = clean.clone()
    corrupt[0, 3] = (clean[0, 3] + 1) % model.config.vocab_size
    corrupt[0, 6] = (clean[0, 6] + 7) % model.config.vocab_size
    return model, CircuitPair(model, clean, corrupt, metric)


@pytest.mark.parametrize("variant", sorted(CIRCUIT_VARIANTS))
def test_no_edge_patched_is_the_model_and_every_edge_patched_is_the_corrupt_run(variant):
    model, pair = _pair(variant)
    with torch.no_grad():
        clean_logits, corrupt_logits = model(pair.clean_ids)[:, -1], model(pair.corrupt_ids)[:, -1]
        every = run_graph(model, pair.graph, pair.clean_ids, patch=pair.graph.valid[None],
                          corrupt=pair.corrupt.outputs)
    assert_close(pair.clean.logits, clean_logits, atol=1e-5, rtol=0)
    assert_close(every.logits, corrupt_logits, atol=1e-5, rtol=0)
    assert_close(faithfulness(pair, torch.stack([pair.graph.valid, ~pair.graph.valid])),
                 torch.tensor([1.0, 0.0]), atol=1e-4, rtol=0)


def test_batched_patches_are_the_same_runs_one_by_one():
    _, pair = _pair("gqa", LogProb(3))
    scores = torch.randn(pair.graph.valid.shape, generator=torch.Generator().manual_seed(0))
    circuits = torch.stack([top_edges(pair, scores, n) for n in (0, 5, 40, pair.graph.n_edges)])
    together = patched_metric(pair, ~circuits, chunk=4)
    alone = torch.cat([patched_metric(pair, ~c[None], chunk=1) for c in circuits])
    assert_close(together, alone, atol=1e-5, rtol=0)
    assert len({round(v, 4) for v in together.tolist()}) >= 3  # the circuits differ in what they measure


def _head_write(model, activations, head: int) -> torch.Tensor:
    """(T, d) what head ``head`` of layer 0 adds to the residual stream: its o_proj columns times its
    output, and under a post-attention norm its share of the normed sum of every head's."""
    dim, layer = model.config.head_dim, model.layers[0]
    head_out = activations[0, "head_out"][0]  # (H, T, D)
    w_o = layer.attn.o_proj.weight.view(-1, head_out.shape[0], dim)  # (d, H, D)
    writes = torch.einsum("htd,mhd->htm", head_out, w_o)  # (H, T, d)
    if not model.config.sandwich_norm:
        return writes[head]
    total = writes.sum(0)
    norm = layer.post_attn_norm
    return norm.weight * writes[head] * torch.rsqrt(total.pow(2).mean(-1, keepdim=True) + norm.eps)


def _input_patched_by_hand(model, pair, source_head: int, layer: int, head: int, input: str) -> torch.Tensor:
    """The model's logits with head ``head``'s query or key input (``input``) in ``layer`` changed by
    (corrupt − clean) of head ``source_head`` of layer 0, the new queries or keys computed here from the
    model's own activations and handed to the model through its edit seam (head ``head``'s output
    replaced). They are the model's own projection of that input, every head's rows at once, normed as
    the model norms it (per head, or across heads), of which head ``head``'s (KV) rows are kept."""
    config, attn, block = model.config, model.layers[layer].attn, model.layers[layer]
    dim, kv = config.head_dim, head // config.n_groups
    points = ("head_out", "resid_pre")
    _, clean = run_with_activations(model, pair.clean_ids, points)
    _, corrupt = run_with_activations(model, pair.corrupt_ids, points)
    change = _head_write(model, corrupt, source_head) - _head_write(model, clean, source_head)  # (T, d)
    x = clean[layer, "resid_pre"][0] + change  # head ``head``'s query or key input
    proj, norm, rows, kept = ((attn.q_proj, attn.q_norm, config.n_heads, head) if input == "q" else
                              (attn.k_proj, attn.k_norm, config.n_kv_heads, kv))
    every = proj(block.attn_norm(x)).view(x.shape[0], rows, dim).transpose(0, 1)  # (H or Hkv, T, D)
    new = norm(every[None])[0, kept]  # (T, D)
    positions = torch.arange(x.shape[0])
    ctx = model.layer_context(layer, positions, positions, x.dtype)
    new = new if ctx.cos is None else apply_rotary(new[None], ctx.cos, ctx.sin)[0]
    recorder = _OneLayer(layer)
    model(pair.clean_ids, record=recorder)
    q, k, v = recorder.kept["q_rot"][0, head], recorder.kept["k_rot"][0, kv], recorder.kept["v"][0, kv]
    q, k = (new, k) if input == "q" else (q, new)
    mask = ctx.causal_mask(q.dtype)
    scores = attn.cap_scores(q @ k.T * attn.scale) + mask[min(head, mask.shape[0] - 1)]
    head_out = clean[layer, "head_out"].clone()
    head_out[0, head] = torch.softmax(scores, dim=-1) @ v
    edit = Intervention([[Replace(layer, "head_out", head)]], {(layer, "head_out"): head_out})
    return model(pair.clean_ids, record=edit)[:, -1]


@pytest.mark.parametrize("input", ["q", "k"])
@pytest.mark.parametrize("variant", ["gqa", "gemma_like", "learned", "olmo2_like", "olmoe_like"])
@torch.no_grad()
def test_one_patched_edge_is_the_model_with_that_input_recomputed(variant, input):
    model, pair = _pair(variant)
    edge = pair.graph.edge_mask([("a0.h1", "a1.h2", input)])
    run = run_graph(model, pair.graph, pair.clean_ids, patch=edge[None], corrupt=pair.corrupt.outputs)
    by_hand = _input_patched_by_hand(model, pair, source_head=1, layer=1, head=2, input=input)
    assert_close(run.logits, by_hand, atol=1e-5, rtol=0)
    assert (run.logits - pair.clean.logits).abs().max() > 1e-4  # the edge matters: the check can see it


def test_the_smallest_circuit_is_the_first_size_that_reaches_the_target():
    _, pair = _pair("mha")
    scores = torch.randn(pair.graph.valid.shape, generator=torch.Generator().manual_seed(1))
    found = smallest_circuit(pair, scores, target=0.9)
    n = found["edges"]
    assert n is not None and found["faithfulness"] >= 0.9
    assert int(found["circuit"].sum()) == n
    assert faithfulness(pair, top_edges(pair, scores, n))[0] == pytest.approx(found["faithfulness"], abs=1e-5)
    curve = found["curve"]
    bracket_low = max(p["edges"] for p in curve if p["edges"] < next(q["edges"] for q in curve if q["faithfulness"] >= 0.9))
    between = faithfulness_curve(pair, scores, range(bracket_low, n))
    assert all(p["faithfulness"] < 0.9 for p in between)  # none of the bracket's smaller sizes reaches it


def test_faithfulness_of_a_pair_that_scores_the_same_is_refused():
    model, pair = _pair("mha")
    same = CircuitPair(model, pair.clean_ids, pair.clean_ids, LogitDiff(3, 5))
    with pytest.raises(ValueError, match="undefined"):
        faithfulness(same, same.graph.valid)
