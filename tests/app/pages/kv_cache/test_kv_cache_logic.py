"""What the KV page computes, without Streamlit or the 135M model: the cache growth against its
formula on tiny generations, both timing runs, the calculator's kind and fit, its figures and the
layer-sharing table."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from app.figures import calculator_charts
from app.figures.sharing_tables import cheapest_and_dearest, sharing_path
from tests.helpers.tiny import random_decoder, tiny_config
from txviz import limits
from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.growth import cache_growth
from txviz.analysis.kv.speed import both_runs_seconds, ms_per_token
from txviz.analysis.kv.fit import chosen_kind, fit
from txviz.generate import generate

PROMPT = torch.arange(1, 9)  # 8 tokens


def _generation(config, n_new: int = 6, use_cache: bool = True):
    return generate(random_decoder(config), PROMPT, n_new, use_cache=use_cache)


@pytest.mark.parametrize("overrides", [dict(), dict(n_kv_heads=1)])
def test_a_real_cache_holds_exactly_what_the_formula_says_at_every_step(overrides):
    config = tiny_config(**overrides)
    run = _generation(config)
    grown = cache_growth(run.steps, run.cache_capacity_bytes, config, element_bytes=4)
    assert list(grown.positions) == list(range(8, 14))
    assert grown.largest_difference == 0
    assert grown.held.shape == (6, config.n_layers) and (grown.held == grown.positions[:, None]).all()
    assert grown.capacity == 8 + 6
    assert grown.bytes_per_token == 2 * config.n_layers * config.n_kv_heads * config.head_dim * 4
    assert grown.last_per_layer.sum() == grown.measured[-1]


def test_a_sliding_window_layer_holds_only_its_window():
    config = tiny_config(n_kv_heads=2, sliding_window=5)
    run = _generation(config)
    grown = cache_growth(run.steps, run.cache_capacity_bytes, config, element_bytes=4)
    assert (grown.held <= 5).all() and grown.held[-1].max() == 5
    assert grown.largest_difference == 0  # the formula caps the tokens at the window too


def test_without_a_cache_the_capacity_is_the_sequence_so_far():
    steps = [SimpleNamespace(position=p, cache_bytes=0, cache_bytes_per_layer=(0, 0)) for p in (8, 9, 10)]
    grown = cache_growth(steps, 0, tiny_config(), element_bytes=4)
    assert grown.capacity == 11 and grown.largest_difference == grown.formula.max() > 0


def test_ms_per_token_leaves_out_the_prefill_of_each_run():
    config = tiny_config()
    runs = {"cached": _generation(config), "uncached": _generation(config, use_cache=False)}
    x, series = ms_per_token(runs)
    assert x == [s.position for s in runs["cached"].steps[1:]] == list(range(9, 14))
    for name, run in runs.items():
        np.testing.assert_allclose(series[name], [s.seconds * 1000 for s in run.steps[1:]])


def test_both_runs_estimate_counts_the_recomputing_run_and_grows_with_the_tokens():
    config = tiny_config()
    cached = limits.generation_estimate(config, 8, 32, element_bytes=4, use_cache=True, gflops=10.0).seconds
    both = both_runs_seconds(config, 8, 32, element_bytes=4, gflops=10.0)
    assert both > 2 * cached  # recomputing every step costs more than the cached run
    assert both_runs_seconds(config, 8, 64, element_bytes=4, gflops=10.0) > both
    assert both_runs_seconds(config, 8, 32, element_bytes=4, gflops=20.0) == pytest.approx(both / 2, rel=0.01)


def test_the_kind_shown_is_the_pick_when_offered_else_the_models_own_else_the_first():
    variants = {"MHA": 1, "GQA": 2, "MQA": 3}
    assert chosen_kind("MQA", variants, "GQA") == "MQA"
    assert chosen_kind(None, variants, "GQA") == "GQA"
    assert chosen_kind("MLA", variants, "GQA") == "GQA"  # a pick made for another model
    assert chosen_kind(None, variants, "MLA") == "MHA"


def test_the_fit_sums_the_bill_at_the_longest_context_that_fits():
    model = memory_model.preset("llama-3-8b")
    settings = dict(batch=1, weight_dtype="bf16", kv_dtype="bf16", prefill_chunk=None)
    lengths = memory.context_lengths(model.max_context)
    summary = fit(model, lengths, 16.0, **settings)  # 15 GiB of weights: a few thousand tokens fit
    assert 0 < summary.longest < model.max_context and summary.at == summary.longest
    assert summary.bill == memory.memory_bill(model, summary.longest, **settings)
    assert 0 <= summary.free_gib < 16.0 - 15.0 and summary.weights_fit
    roomy = fit(model, lengths, 2048.0, **settings)  # everything fits: summed at the model's own context
    assert roomy.at == min(model.max_context, lengths[-1])
    small = fit(model, lengths, 4.0, **settings)
    assert small.longest == 0 and not small.weights_fit and small.free_gib < 0


def test_the_calculator_figures_carry_the_memory_functions_numbers():
    model = memory_model.preset("llama-3-8b")
    settings = dict(batch=2, weight_dtype="fp8", kv_dtype="bf16", prefill_chunk=None)
    lengths = [1024, 4096]
    stacked = calculator_charts.bill(model, "GQA", lengths, settings, 80.0)
    by_name = {trace.name: np.asarray(trace.y, dtype=float) for trace in stacked.data if trace.name}
    expected = memory.memory_bill(model, 4096, **settings)
    assert by_name["KV cache"][-1] == pytest.approx(expected.kv_cache / memory.GIB)
    assert by_name["weights"][-1] == pytest.approx(expected.weights / memory.GIB)
    weights = calculator_charts.weights_by_dtype(model).data[0]
    assert list(weights.x) == list(memory.WEIGHT_DTYPES)
    assert weights.y[0] == pytest.approx(memory.weight_bytes(model, memory.WEIGHT_DTYPES[0]) / memory.GIB)
    kv = calculator_charts.memory_by_batch(model, "GQA", lengths, "bf16", "fp8").data[0]
    np.testing.assert_allclose(np.asarray(kv.y, dtype=float) / kv.y[0], calculator_charts.BATCHES)  # linear in batch


def test_the_sharing_table_orders_layers_and_rounds_the_path():
    sweep = SimpleNamespace(order=[4, 1, 3, 0, 2], path_layers=[0, 2], path_kv_bytes_per_token=[100, 80],
                            path_perplexity=[12.345, 13.0], path_kl=[0.0, 0.123456], path_top1=[1.0, 0.9567])
    assert cheapest_and_dearest(sweep) == ([4, 1, 3], [2, 0, 3])
    table = sharing_path(sweep)
    assert table["perplexity"] == [12.35, 13.0] and table["mean KL (nats)"] == [0.0, 0.1235]
    assert table["top-1 agreement"] == ["100.0%", "95.7%"]
