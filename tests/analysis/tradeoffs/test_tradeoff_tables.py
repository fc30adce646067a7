"""The tables and series the Design tradeoffs page shows (txviz.analysis.tradeoffs.tables): built from
the formulas and the measurements, checked against them."""

from __future__ import annotations

import pytest
import torch

from txviz.analysis.tradeoffs import tables
from txviz.analysis.tradeoffs import formulas as tr
from txviz.analysis.tradeoffs import noise
from txviz.analysis.kv.memory import token_kv_bytes
from txviz.analysis.tradeoffs.timing import AttentionTiming, SequenceTiming
from txviz.config import ModelConfig
from txviz.model.counts import count_params

SMOLLM2 = ModelConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, ffn_hidden=1536,
                      tie_embeddings=True, max_seq_len=8192)


def test_powers_of_two_and_the_depths_compared():
    assert tables.powers_of_two(16, 100) == [16, 32, 64]
    assert tables.powers_of_two(128, 512) == [128, 256, 512]
    assert tables.depths_around(30) == [7, 15, 30, 60, 120]
    assert tables.depths_around(4, (2, 7)) == [1, 2, 4, 7, 8, 16]
    assert tables.depths_around(1) == [1, 2, 4]


def test_the_kv_dtype_is_bf16_for_two_byte_models_else_fp32():
    assert [tables.kv_dtype_name(n) for n in (4, 2, 1)] == ["fp32", "bf16", "fp32"]


def test_the_zoo_table_keeps_the_trained_rows_renamed_and_names_the_rest():
    rows = [{"variant": "base", "trained": True, "val_loss": 2.5, "params": 10},
            {"variant": "mqa", "trained": False}]
    assert tables.trained_table(rows, {"variant": "variant", "val_loss": "val loss"}) == [
        {"variant": "base", "val loss": 2.5}]
    assert tables.missing_variants(rows) == ["mqa"]


def test_loss_noise_is_each_estimate_and_every_ordered_pair():
    windows = {"a": torch.tensor([1.0, 2.0, 3.0]), "b": torch.tensor([1.5, 2.0, 2.5])}
    estimates, paired = tables.loss_noise(windows)
    assert estimates == [noise.loss_estimate("a", windows["a"]), noise.loss_estimate("b", windows["b"])]
    assert set(paired) == {("a", "b"), ("b", "a")}
    assert paired[("a", "b")][0] == pytest.approx(-paired[("b", "a")][0]) == pytest.approx(0.0)
    assert paired[("a", "b")] == noise.paired_difference(windows["a"], windows["b"])


def test_mixtral_buys_about_four_times_the_parameters_for_under_twice_the_flops():
    rows = tables.reference_rows()
    assert [r["model"] for r in rows] == ["Mistral 7B", "Mixtral 8×7B"]
    assert rows[1]["total params"] > rows[1]["active params"] and "FLOPs/token (4k context)" in rows[0]
    params, flops = tables.sparse_over_dense(tr.REFERENCES["mistral-7b"], tr.REFERENCES["mixtral-8x7b"])
    assert params == rows[1]["total params"] / rows[0]["total params"]
    assert 3 < params < 8 and 1 < flops < 2


def test_attention_kind_rows_shrink_the_cache_with_the_kv_heads():
    rows = tables.attention_kind_rows(SMOLLM2, "bf16")
    assert [r["kind"] for r in rows] == ["MHA", "GQA", "MQA"] and [r["KV heads"] for r in rows] == [9, 3, 1]
    per_head = {r["KV bytes/token (bf16)"] / r["KV heads"] for r in rows}
    assert len(per_head) == 1 and rows[1]["KV bytes/token (bf16)"] == token_kv_bytes(SMOLLM2, "bf16")


def test_attention_kind_rows_name_each_window_and_chunk():
    from txviz.analysis.kv import memory_model

    scout = memory_model.preset("llama-4-scout")
    assert {r["window"] for r in tables.attention_kind_rows(scout, "bf16")} == {"chunks of 8,192 on 36 of 48 layers"}
    gemma = memory_model.preset("gemma-2-9b")
    assert tables.attention_kind_rows(gemma, "bf16")[0]["window"] == "4,096 on 21 of 42 layers"


def test_context_memory_grows_linearly_for_the_cache_as_given_for_the_scores():
    lengths = [16, 32, 64]
    series = tables.context_memory_mib(SMOLLM2, lengths, [2 ** 20, 4 * 2 ** 20, 16 * 2 ** 20], "fp32")
    assert series["one layer's score matrix"] == [1.0, 4.0, 16.0]
    cache = series["KV cache, all layers"]
    assert cache[0] == token_kv_bytes(SMOLLM2, "fp32") * 16 / 2 ** 20 and cache[2] == pytest.approx(4 * cache[0])


def test_the_extrapolation_table_drops_the_flag_and_the_untrained():
    rows = [{"variant": "base", "trained": True, "loss_1x": 2.0}, {"variant": "alibi", "trained": False}]
    assert tables.extrapolation_table(rows) == [{"variant": "base", "loss_1x": 2.0}]


def test_the_benchmark_table_converts_units_and_leaves_skipped_naive_runs_empty():
    result = [AttentionTiming(128, 0.002, 3 * 2 ** 20, 2 ** 20, 0.004, 5 * 2 ** 20, 1e-6, "tracemalloc"),
              AttentionTiming(256, 0.008, 6 * 2 ** 20, 4 * 2 ** 20, None, None, None, "tracemalloc")]
    table = tables.benchmark_table(result)
    assert table["tokens"] == [128, 256] and table["SDPA ms"] == pytest.approx([2.0, 8.0])
    assert table["naive ms"] == [pytest.approx(4.0), None] and table["speedup"] == [pytest.approx(2.0), None]
    assert table["naive peak MiB"] == [5.0, None] and table["one score matrix MiB (analytic)"] == [1.0, 4.0]
    assert len({len(column) for column in table.values()}) == 1


def test_the_reading_lengths_stop_at_the_cap_and_the_table_keeps_the_measured_numbers():
    assert tables.reading_lengths(100) == [16, 32, 64] and tables.reading_lengths(8) == [8]
    result = [SequenceTiming(4, 0.001, 0.004, 1e-6), SequenceTiming(8, 0.002, 0.016, 2e-6)]
    table = tables.reading_table(result)
    assert list(table) == ["tokens", "parallel_s", "sequential_s", "max |Δ last logits|", "sequential ÷ parallel"]
    assert table["sequential ÷ parallel"] == [4.0, 8.0] and table["max |Δ last logits|"] == [1e-6, 2e-6]
    times = tables.reading_times_ms(result)
    assert times["one parallel pass"] == pytest.approx([1.0, 2.0])
    assert times["one token at a time (KV cache)"] == pytest.approx([4.0, 16.0])


def test_the_reference_total_params_are_the_counted_ones():
    rows = tables.reference_rows(context=2048)
    assert rows[0]["total params"] == count_params(tr.REFERENCES["mistral-7b"]) and "FLOPs/token (2k context)" in rows[0]
