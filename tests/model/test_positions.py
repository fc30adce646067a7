"""Positions: RoPE's relative property and scaling variants against transformers, ALiBi's
slopes and bias against Press et al. (2022), and why position must be injected at all."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.tiny import (alibi_slopes_reference, default_inv_freq, random_decoder, random_ids,
                                rotate_pairs_reference, tiny_config)
from txviz import RopeScaling, trace
from txviz.model.positions import RoPE, alibi_slopes, apply_rotary, rope_inv_freq


# ---- RoPE ---------------------------------------------------------------------------------------
def rotate(rope: RoPE, x: torch.Tensor, position: int) -> torch.Tensor:
    cos, sin = rope.rotation(torch.tensor([position]))
    return apply_rotary(x[None, None, None], cos, sin)[0, 0, 0]  # (D,)


@pytest.mark.parametrize("head_dim,theta", [(8, 10000.0), (32, 10000.0), (64, 500000.0)])
def test_rope_score_depends_only_on_relative_distance(head_dim, theta):
    rope = RoPE(tiny_config(n_heads=4, head_dim=head_dim, rope_theta=theta))
    q, k = torch.randn(2, head_dim, generator=torch.Generator().manual_seed(1))
    for offset in [0, 1, 3, 17]:
        scores = [rotate(rope, q, n + offset) @ rotate(rope, k, n) for n in [0, 1, 5, 42, 250, 1000]]
        for score in scores[1:]:
            assert_close(score, scores[0], rtol=1e-4, atol=1e-4)
    # and it does depend on the distance: otherwise the property above would be vacuous
    assert not torch.isclose(rotate(rope, q, 3) @ rotate(rope, k, 0), rotate(rope, q, 0) @ rotate(rope, k, 0))


def test_rope_is_the_seed_rotation_matrix_on_each_pair():
    config = tiny_config(n_heads=4, head_dim=16)
    rope = RoPE(config)
    positions = torch.tensor([0, 1, 2, 7, 100])
    x = torch.randn(2, 3, len(positions), 16)
    cos, sin = rope.rotation(positions)
    expected = rotate_pairs_reference(x, positions, default_inv_freq(16, config.rope_theta))
    assert_close(apply_rotary(x, cos, sin).double(), expected, rtol=1e-5, atol=1e-5)


def hf_rope_config(head_dim: int, theta: float, parameters: dict):
    """transformers' LlamaConfig with these RoPE settings."""
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                       max_position_embeddings=131072, rope_parameters={"rope_theta": theta, **parameters})


SCALINGS = {
    "linear": (RopeScaling(kind="linear", factor=4.0), {"rope_type": "linear", "factor": 4.0}),
    "yarn": (RopeScaling(kind="yarn", factor=4.0, original_max_seq_len=4096),
             {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}),
    "yarn_custom_betas": (RopeScaling(kind="yarn", factor=8.0, original_max_seq_len=2048, beta_fast=16, beta_slow=2),
                          {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048,
                           "beta_fast": 16, "beta_slow": 2}),
    "llama3": (RopeScaling(kind="llama3", factor=8.0, original_max_seq_len=8192),
               {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
                "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
    "llama3_other_factors": (RopeScaling(kind="llama3", factor=32.0, original_max_seq_len=8192,
                                         low_freq_factor=2.0, high_freq_factor=8.0),
                             {"rope_type": "llama3", "factor": 32.0, "original_max_position_embeddings": 8192,
                              "low_freq_factor": 2.0, "high_freq_factor": 8.0}),
}


@needs_transformers
@pytest.mark.parametrize("kind", sorted(SCALINGS))
@pytest.mark.parametrize("head_dim,theta", [(64, 10000.0), (128, 500000.0), (32, 1000000.0)])
def test_rope_scaling_matches_transformers(kind, head_dim, theta):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    ours, parameters = SCALINGS[kind]
    inv_freq, attention = rope_inv_freq(head_dim, theta, ours)
    expected_inv_freq, expected_attention = ROPE_INIT_FUNCTIONS[parameters["rope_type"]](
        hf_rope_config(head_dim, theta, parameters))
    assert_close(inv_freq, expected_inv_freq.float(), rtol=1e-6, atol=0)
    assert attention == pytest.approx(expected_attention)


@needs_transformers
@pytest.mark.parametrize("head_dim,theta", [(64, 10000.0), (128, 500000.0)])
def test_rope_unscaled_and_ntk_match_transformers(head_dim, theta):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    plain, _ = rope_inv_freq(head_dim, theta, RopeScaling())
    assert_close(plain.double(), default_inv_freq(head_dim, theta), rtol=1e-6, atol=0)
    # transformers' dynamic NTK uses base·(f·L/L_max − (f − 1))^(D/(D−2)); at L = L_max·(2f − 1)/f
    # that is base·f^(D/(D−2)), the static NTK-aware base
    factor, max_len = 2.0, 1024
    config = hf_rope_config(head_dim, theta, {"rope_type": "dynamic", "factor": factor})
    config.max_position_embeddings = max_len
    expected, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, seq_len=int(max_len * (2 * factor - 1) / factor))
    ntk, _ = rope_inv_freq(head_dim, theta, RopeScaling(kind="ntk", factor=factor))
    assert_close(ntk, expected.float(), rtol=1e-5, atol=0)


# ---- ALiBi --------------------------------------------------------------------------------------
def test_alibi_slopes_for_eight_heads_are_the_closed_form():
    assert_close(alibi_slopes(8).double(), torch.tensor([2.0 ** -h for h in range(1, 9)], dtype=torch.float64))


@pytest.mark.parametrize("n_heads", [1, 2, 4, 6, 8, 12, 16, 20, 32])
def test_alibi_slopes_follow_press_et_al(n_heads):
    assert_close(alibi_slopes(n_heads).double(), torch.tensor(alibi_slopes_reference(n_heads), dtype=torch.float64))


@needs_transformers
@pytest.mark.parametrize("n_heads", [6, 8, 12])
def test_alibi_slopes_match_bloom(n_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    bias = build_alibi_tensor(torch.ones(1, 3), n_heads, torch.float32)  # (H, 1, 3): slope_h · position
    assert_close(alibi_slopes(n_heads), bias[:, 0, 1])


@pytest.mark.parametrize("n_heads", [8, 6])
def test_traced_alibi_bias_is_minus_slope_times_distance(n_heads):
    config = tiny_config(positions="alibi", n_heads=n_heads, d_model=8 * n_heads)
    model = random_decoder(config)
    tr = trace(model, random_ids(config, 9), capture=("alibi_bias", "attn_logits", "attn_scores"))
    slopes = torch.tensor(alibi_slopes_reference(n_heads))
    i, j = torch.arange(9)[:, None], torch.arange(9)[None, :]
    visible = j <= i
    expected = -slopes[:, None, None] * (i - j)  # (H, T, T)
    assert_close(tr["alibi_bias"][:, visible], expected[:, visible])
    added = tr["attn_scores"] - tr["attn_logits"]  # (L, B, H, T, T): what was added before the softmax
    for layer in range(config.n_layers):
        assert_close(added[layer, 0][:, visible], expected[:, visible], rtol=1e-5, atol=1e-5)
        assert torch.isneginf(added[layer, 0][:, ~visible]).all()


# ---- why positions are needed -------------------------------------------------------
def position_aware_scores(tr) -> torch.Tensor:
    """Layer-0 scores of head-sequence 0 before the causal mask, with any positional bias: (H, T, T)."""
    scores = tr["attn_logits"][0, 0]
    return scores + tr["alibi_bias"] if "alibi_bias" in tr else scores


def layer0_scores(model, ids: torch.Tensor) -> torch.Tensor:
    return position_aware_scores(trace(model, ids, capture=("attn_logits", "alibi_bias"), layers=[0]))


@pytest.mark.parametrize("positions,equivariant", [("none", True), ("rope", False), ("learned", False),
                                                   ("alibi", False)])
def test_shuffling_tokens_only_rearranges_scores_without_positions(positions, equivariant):
    config = tiny_config(positions=positions)
    model = random_decoder(config)
    ids = torch.arange(10)[None] * 7 % config.vocab_size  # ten distinct tokens
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(0))
    original, shuffled = layer0_scores(model, ids), layer0_scores(model, ids[:, perm])
    rearranged = original[:, perm][:, :, perm]  # score of (perm[i], perm[j]) moves to (i, j)
    assert torch.allclose(shuffled, rearranged, rtol=1e-5, atol=1e-5) == equivariant


@pytest.mark.parametrize("positions,invariant", [("none", True), ("rope", False), ("learned", False),
                                                 ("alibi", False)])
def test_one_layer_last_token_sees_a_bag_of_words_without_positions(positions, invariant):
    """The causal mask breaks full permutation symmetry, but in one layer the last token attends to
    all earlier ones as a set: without positions, shuffling them leaves its logits unchanged."""
    config = tiny_config(positions=positions, n_layers=1)
    model = random_decoder(config)
    ids = torch.arange(10)[None] * 7 % config.vocab_size
    perm = torch.cat([torch.randperm(9, generator=torch.Generator().manual_seed(0)), torch.tensor([9])])
    with torch.inference_mode():
        original, shuffled = model(ids)[0, -1], model(ids[:, perm])[0, -1]
    assert torch.allclose(original, shuffled, rtol=1e-5, atol=1e-5) == invariant


def test_model_to_bf16_keeps_rope_frequencies_in_float32():
    """Casting the model must not cast the angle tables: at position 8000, bf16 θ would be off by radians."""
    import torch

    from tests.helpers.tiny import random_decoder, tiny_config

    model = random_decoder(tiny_config()).to(torch.bfloat16)
    assert model.positions.inv_freq.dtype == torch.float32
    angles = model.positions.angles(torch.tensor([8000]))
    assert angles.dtype == torch.float32
    alibi = random_decoder(tiny_config(positions="alibi")).to(torch.bfloat16)
    assert alibi.positions.slopes.dtype == torch.float32


# ---- what the Positions page measures (txviz.analysis.positions.measured) ----------------------------------
@pytest.mark.parametrize("n_heads", [4, 6])
def test_slopes_read_back_from_a_traced_bias_are_the_formulas(n_heads):
    from txviz.analysis.positions import measured as pos

    config = tiny_config(positions="alibi", n_heads=n_heads, d_model=8 * n_heads)
    tr = trace(random_decoder(config), random_ids(config, 7), capture=("alibi_bias",))
    assert_close(pos.measured_slopes(tr["alibi_bias"]), alibi_slopes(n_heads))
    with pytest.raises(ValueError):
        pos.measured_slopes(tr["alibi_bias"][:, :1, :1])


def test_removing_the_bias_gives_the_softmax_of_the_unbiased_masked_scores():
    from txviz.analysis.positions import measured as pos

    config = tiny_config(positions="alibi", n_heads=4, d_model=32)
    tr = trace(random_decoder(config), random_ids(config, 9), capture=("alibi_bias", "attn_logits", "attn_scores"))
    scores, logits, bias = tr["attn_scores"][1, 0], tr["attn_logits"][1, 0], tr["alibi_bias"]
    future = torch.triu(torch.ones(9, 9, dtype=torch.bool), 1)
    assert_close(pos.without_bias(scores, bias), torch.softmax(logits.masked_fill(future, float("-inf")), -1),
                 rtol=1e-5, atol=1e-6)
    assert_close(pos.with_bias(pos.without_bias(scores, bias).log(), bias), torch.softmax(scores, -1),
                 rtol=1e-4, atol=1e-6)


def test_mean_distance_and_entropy_of_simple_maps():
    from txviz.analysis.positions import measured as pos

    t = 5
    diagonal = torch.eye(t)  # every query on itself: distance 0, entropy 0
    first = torch.zeros(t, t)
    first[:, 0] = 1  # every query on token 0: distance i
    even = torch.tril(torch.ones(t, t)) / torch.arange(1, t + 1)[:, None]
    assert float(pos.mean_distance(diagonal)) == 0
    assert float(pos.mean_distance(first)) == pytest.approx(sum(range(t)) / t)
    assert_close(pos.row_entropy(diagonal), torch.zeros(t))
    assert_close(pos.row_entropy(even), pos.uniform_entropy(t))  # evenly over what it sees: log(i + 1)


def test_cosine_similarity_of_a_position_table():
    from txviz.analysis.positions import measured as pos

    table = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0], [-3.0, 0.0]])
    similarity = pos.cosine_similarity_matrix(table)
    assert_close(similarity.diagonal(), torch.ones(4))
    assert similarity[0, 2] == pytest.approx(0.0) and similarity[0, 3] == pytest.approx(-1.0)
    assert_close(pos.neighbour_similarity(table, 1), torch.tensor([(2 ** -0.5 + 2 ** -0.5 + 0.0) / 3]))


def test_the_page_shows_each_scheme_its_own_sections_and_permutation_for_all():
    from txviz.analysis.positions import measured as pos

    assert all("Permutation" in pos.sections(kind) for kind in ("rope", "alibi", "learned", "none"))
    assert [name for name in pos.sections("rope") if "RoPE" in name] == ["RoPE angles", "RoPE scaling"]
    for kind in ("alibi", "learned", "none"):
        assert not any("RoPE" in name or "what-if" in name for name in pos.sections(kind))
