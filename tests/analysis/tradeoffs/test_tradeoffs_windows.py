"""attention_ffn_crossover on models with windowed layers (Gemma 2/3: some layers see only W keys): T* is
where attention_flops, the mean over the layers, crosses the FFN's, found by brute force over whole
tokens; full-attention models keep F / (4·H·D)."""

from __future__ import annotations

import pytest

from txviz.model.counts import ffn_flops_per_token
from txviz.analysis.tradeoffs import formulas as tr
from txviz.config import ModelConfig

BASE = ModelConfig(vocab_size=208, d_model=64, n_layers=6, n_heads=4, n_kv_heads=2, ffn_hidden=128,
                   tie_embeddings=True, max_seq_len=4096)
GEMMA_PATTERN = ("sliding",) * 5 + ("full",)
CONFIGS = {"full": BASE,
           "5 local of 6 (W 16)": BASE.replace(sliding_window=16, layer_types=GEMMA_PATTERN),
           "5 local of 6 (W 100)": BASE.replace(sliding_window=100, layer_types=GEMMA_PATTERN),
           "2 local of 6 (W 4)": BASE.replace(sliding_window=4, layer_types=("sliding", "full") * 2 + ("full",) * 2),
           "every layer W 300": BASE.replace(sliding_window=300)}


def first_token_attention_overtakes(config: ModelConfig, causal_skip: bool) -> int:
    """The first whole T whose plotted attention FLOPs exceed the FFN's."""
    tokens = 1
    while True:
        costs = tr.context_costs(config, [tokens], causal_skip=causal_skip)
        if costs["attention_flops"][0] > costs["ffn_flops"][0]:
            return tokens
        tokens += 1


@pytest.mark.parametrize("causal_skip", [False, True])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_crossover_is_where_the_plotted_curves_cross(name, causal_skip):
    config = CONFIGS[name]
    crossover = tr.attention_ffn_crossover(config, causal_skip=causal_skip)
    first = first_token_attention_overtakes(config, causal_skip)
    assert first - 1 - 1e-6 <= crossover <= first  # attention ≤ FFN up to T*, above it after (equal at T*)


def test_windowed_layers_move_t_star_right_of_a_global_layers():
    per_key, ffn = 4 * 4 * 16, ffn_flops_per_token(BASE)
    assert tr.attention_ffn_crossover(BASE) == tr.global_layer_crossover(BASE) == ffn / per_key  # unchanged
    mixed = CONFIGS["5 local of 6 (W 16)"]
    assert tr.global_layer_crossover(mixed) == ffn / per_key
    # (5·16 + T)/6 keys per query on average: T* = 6·F/(4·H·D) − 5·16
    assert tr.attention_ffn_crossover(mixed) == pytest.approx(6 * ffn / per_key - 80)
    assert tr.windowed_layers(mixed) == {16: 5} and tr.windowed_layers(BASE) == {}


def test_a_model_whose_every_layer_slides_below_the_ffn_never_crosses():
    ffn_keys = ffn_flops_per_token(BASE) / (4 * 4 * 16)  # 96: keys per query at which attention = FFN
    assert tr.attention_ffn_crossover(BASE.replace(sliding_window=int(ffn_keys) - 1)) is None
    assert tr.attention_ffn_crossover(BASE.replace(sliding_window=int(ffn_keys) + 4)) == pytest.approx(ffn_keys)
