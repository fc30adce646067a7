"""txviz.analysis.tradeoffs.formulas and timing: equal-budget shapes, the attention/FFN crossover, naive
attention against SDPA (same outputs, honest memory), parallel against token-by-token reading, and
the zoo's files read into rows."""

from __future__ import annotations

import json
import statistics

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.tiny import random_decoder, tiny_config
from txviz.analysis.tradeoffs import tables, timing
from txviz.analysis.tradeoffs import formulas as tr
from txviz.analysis.tradeoffs import noise, zoo_results
from txviz.config import ModelConfig
from txviz.loading.zoo import SHIPPED_ZOO, config_json
from txviz.model.counts import count_params, ffn_flops_per_token, non_embedding_params

ZOO_BASE = ModelConfig(vocab_size=208, d_model=64, n_layers=4, n_heads=4, n_kv_heads=2, ffn_hidden=128,
                       tie_embeddings=True, max_seq_len=128)
SMOLLM2 = ModelConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, ffn_hidden=1536,
                      tie_embeddings=True, max_seq_len=8192)
SHAPES = {"zoo base": ZOO_BASE, "smollm2": SMOLLM2, "mixtral-8x7b": tr.REFERENCES["mixtral-8x7b"],
          "gelu learned": ZOO_BASE.replace(ffn="gelu_mlp", norm="layernorm", positions="learned", qkv_bias=True)}


# ---- (a) depth vs width ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_equal_budget_shapes_really_have_equal_parameters(name):
    config = SHAPES[name]
    budget = non_embedding_params(config)
    depths = [max(1, config.n_layers // 4), config.n_layers // 2, config.n_layers, 2 * config.n_layers]
    shapes = tr.equal_budget_shapes(config, depths)
    assert [s.n_layers for s in shapes] == depths
    for shape in shapes:
        assert shape.d_model == shape.n_heads * shape.head_dim and shape.n_heads == config.n_heads
        # within one unit of ffn_hidden of the budget: ≤ 0.5 % at these sizes
        assert abs(non_embedding_params(shape) - budget) <= 0.005 * budget
    same = shapes[2]
    assert (same.d_model, same.ffn_hidden) == (config.d_model, config.ffn_hidden)  # its own depth: itself


def test_non_embedding_params_leave_out_the_tables():
    untied = ZOO_BASE.replace(tie_embeddings=False)
    assert count_params(untied) - non_embedding_params(untied) == 2 * 208 * 64
    learned = ZOO_BASE.replace(positions="learned")
    assert count_params(learned) - non_embedding_params(learned) == 208 * 64 + 128 * 64


def test_shape_rows_kv_grows_with_depth_at_equal_budget():
    rows = tr.shape_rows(tr.equal_budget_shapes(SMOLLM2, [8, 30, 120]), kv_dtype="bf16")
    kv = [r["kv_bytes_per_token"] for r in rows]
    assert kv == sorted(kv) and kv[1] == 2 * 30 * 3 * 64 * 2


# ---- (b) dense vs MoE -----------------------------------------------------------------------------
def test_expert_family_grows_capacity_not_compute():
    rows = tr.expert_family(ZOO_BASE, (1, 2, 4, 8, 16), top_k=2)
    assert rows[0]["total_params"] == count_params(ZOO_BASE) == rows[0]["active_params"]
    totals = [r["total_params"] for r in rows]
    assert totals == sorted(totals)
    flops = [r["flops_per_token"] for r in rows[1:]]  # E ≥ k: k experts run, only the router grows
    assert all(later - earlier == 2 * ZOO_BASE.n_layers * ZOO_BASE.d_model * (b - a)
               for (earlier, a), (later, b) in zip(zip(flops, (2, 4, 8)), zip(flops[1:], (4, 8, 16))))


# ---- (d) context length ---------------------------------------------------------------------------
@pytest.mark.parametrize("causal_skip", [False, True])
@pytest.mark.parametrize("name", ["zoo base", "smollm2", "mixtral-8x7b"])
def test_attention_overtakes_the_ffn_at_the_crossover(name, causal_skip):
    config = SHAPES[name]
    crossover = tr.attention_ffn_crossover(config, causal_skip=causal_skip)
    per_key = 4 * config.n_heads * config.head_dim
    expected = ffn_flops_per_token(config) / per_key
    assert crossover == pytest.approx(2 * expected - 1 if causal_skip else expected)
    below, above = int(crossover) - 1, int(crossover) + 2
    costs = tr.context_costs(config, [below, above], causal_skip=causal_skip)
    assert costs["attention_flops"][0] < costs["ffn_flops"][0]
    assert costs["attention_flops"][1] > costs["ffn_flops"][1]


def test_smollm2_crossover_and_quadratic_growth():
    assert tr.attention_ffn_crossover(SMOLLM2) == 2304  # 2·3·576·1536 / (4·9·64)
    costs = tr.context_costs(SMOLLM2, [1024, 2048])
    assert costs["attention_flops"][1] == 4 * costs["attention_flops"][0]
    assert costs["ffn_flops"][1] == 2 * costs["ffn_flops"][0]
    assert costs["score_bytes"][0] == 9 * 1024 * 1024 * 4


def test_causal_and_windowed_attention_counts_match_a_brute_force_count():
    windowed = ZOO_BASE.replace(sliding_window=16)
    for config in (ZOO_BASE, windowed):
        window = config.sliding_window or 10**9
        for tokens in (1, 7, 16, 40):
            pairs = sum(min(t, window) for t in range(1, tokens + 1))
            assert tr.attention_flops(config, tokens, causal_skip=True) == 4 * 64 * pairs
    assert tr.attention_ffn_crossover(ZOO_BASE.replace(sliding_window=8)) is None  # 8 keys never outweigh the FFN


# ---- (e) FlashAttention vs naive ------------------------------------------------------------------
@pytest.mark.parametrize("tokens", [1, 5, 64, 200])
def test_naive_attention_equals_sdpa(tokens):
    generator = torch.Generator().manual_seed(tokens)
    q, k, v = (torch.randn(2, 3, tokens, 16, generator=generator) for _ in range(3))
    assert_close(timing.naive_attention(q, k, v), timing.sdpa_attention(q, k, v), rtol=1e-4, atol=1e-5)


def test_peak_memory_is_measured_on_the_cpu():
    _, peak, method = timing.peak_bytes(lambda: torch.ones(1 << 20) * 2, "cpu")  # two 4 MiB tensors live at once
    assert 8 << 20 <= peak < 9 << 20 and "profiler" in method


def test_attention_benchmark_same_outputs_less_memory_for_sdpa():
    rows = timing.attention_benchmark([64, 512], n_heads=2, head_dim=16, repeats=1)
    assert [r.tokens for r in rows] == [64, 512]
    for r in rows:
        assert r.max_abs_diff < 1e-5 and r.naive_s > 0 and r.sdpa_s > 0
        assert r.naive_peak_bytes >= r.score_matrix_bytes == 2 * r.tokens ** 2 * 4  # it holds the T×T scores
    assert rows[1].sdpa_peak_bytes < rows[1].score_matrix_bytes < rows[1].naive_peak_bytes
    skipped = timing.attention_benchmark([512], n_heads=2, head_dim=16, repeats=1, max_naive_bytes=1 << 20)[0]
    assert skipped.naive_s is None and skipped.speedup is None and skipped.sdpa_s > 0


# ---- (f) parallel vs one token at a time ----------------------------------------------------------
@pytest.mark.parametrize("variant", [dict(n_kv_heads=2), dict(n_kv_heads=2, n_experts=4, top_k=2),
                                     dict(positions="alibi", sliding_window=5)])
def test_parallel_and_sequential_reading_agree_and_come_back_in_order(variant):
    model = random_decoder(tiny_config(**variant))
    rows = timing.parallel_vs_sequential(model, [16, 4, 8, 8], repeats=1)
    assert [r.tokens for r in rows] == [4, 8, 16]
    for r in rows:
        assert r.max_abs_diff < 1e-4 and r.parallel_s > 0 and r.sequential_s > 0 and r.ratio == r.sequential_s / r.parallel_s
    with pytest.raises(ValueError, match="context"):
        timing.parallel_vs_sequential(model, [65])


# ---- the zoo's files ------------------------------------------------------------------------------
def _write_variant(root, name: str, config: ModelConfig, evaluation: dict) -> None:
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(config_json(config.replace(name=name)))
    (directory / "eval.json").write_text(json.dumps(evaluation))
    (directory / "curves.json").write_text(json.dumps({"loss": [3.0, 2.0], "aux_loss": [1.2, 1.1]}))


def test_zoo_rows_read_config_and_eval_and_name_what_is_missing(tmp_path):
    moe = ZOO_BASE.replace(n_experts=4, top_k=1, router_norm="all")
    _write_variant(tmp_path, "moe_top1", moe, {
        "val_loss": 1.5, "val_loss_2x": 1.7, "val_loss_4x": 2.5,
        "extrapolation": {"context": 128, "loss_beyond_context_at": {"256": 1.9, "512": 2.9}, "why_null": None},
        "expert_load": {"per_layer": [[0.7, 0.1, 0.1, 0.1]] * 4, "effective_experts_per_layer": [2.0, 2.0, 3.0, 3.0]}})
    rows = zoo_results.zoo_rows(["moe_top1", "moe_top2"], tmp_path, kv_dtype="fp32")
    assert rows[1] == {"variant": "moe_top2", "trained": False}
    row = rows[0]
    assert row["params"] == count_params(moe) and row["active_params"] < row["params"]
    assert row["kv_bytes_per_token"] == 2 * 4 * 2 * 16 * 4 and row["effective_experts"] == 2.5
    assert (row["val_loss"], row["val_loss_4x"], row["top_k"]) == (1.5, 2.5, 1)
    extrapolation = zoo_results.extrapolation_rows(["moe_top1"], tmp_path)[0]
    assert (extrapolation["loss_2x"], extrapolation["loss_beyond_4x"]) == (1.7, 2.9)
    assert zoo_results.zoo_curves(["moe_top1", "moe_top2"], tmp_path) == {"moe_top1": {"loss": [3.0, 2.0], "aux_loss": [1.2, 1.1]}}


@pytest.mark.skipif(not (SHIPPED_ZOO / "base" / "eval.json").is_file(), reason="the zoo's base is not trained")
def test_the_shipped_zoo_base_reads():
    row = zoo_results.zoo_rows(["base"])[0]
    assert row["trained"] and row["n_experts"] == 0 and row["val_loss"] > 0
    assert row["non_embedding_params"] == non_embedding_params(row["config"])


# ---- noise in the zoo's losses: the wording follows the numbers -------------------------------------
def _estimates(means, se=0.0057, n=552):
    return [noise.LossEstimate(name, mean, se, n) for name, mean in means.items()]


def test_a_gap_inside_the_standard_error_is_called_noise_and_one_seed_is_said():
    estimates = _estimates({"mha": 1.0528, "base": 1.0530, "mqa": 1.0516})
    text = noise.noise_finding(estimates, {("base", "mqa"): (0.0014, 0.0003)}, n_seeds=1)
    assert "within **0.0014 nats**" in text and "within evaluation noise" in text and "0.2 standard errors" in text
    assert "base − mqa = +0.0014 ± 0.0003" in text and "5 paired standard errors" in text
    assert "one seed" in text and "no evidence" in text


def test_a_gap_beyond_the_noise_is_not_called_noise():
    text = noise.noise_finding(_estimates({"a": 1.00, "b": 1.10}, se=0.01), {("b", "a"): (0.1, 0.002)}, n_seeds=3)
    assert "larger than evaluation noise" in text and "within evaluation noise" not in text
    assert "one seed" not in text


def test_a_paired_difference_inside_its_noise_says_so():
    text = noise.noise_finding(_estimates({"a": 1.0, "b": 1.0002}), {("b", "a"): (0.0002, 0.0003)})
    assert "inside the paired noise too" in text


def test_standard_errors_and_paired_differences():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    b = a + torch.tensor([0.1, -0.1, 0.1, -0.1])
    estimate = noise.loss_estimate("a", a)
    assert estimate.mean == 2.5 and estimate.n_windows == 4
    assert estimate.se == pytest.approx(float(a.std()) / 2)
    diff, se = noise.paired_difference(b, a)
    assert diff == pytest.approx(0.0, abs=1e-12) and se == pytest.approx(float((b - a).std()) / 2)
    assert se < estimate.se  # the same windows cancel what the text itself varies


def test_the_loss_axis_does_not_zoom_into_the_noise():
    estimates = _estimates({"mha": 1.0528, "base": 1.0530, "mqa": 1.0516}, se=0.0057)
    low, high = noise.loss_axis_range(estimates)
    assert high - low >= 0.05 * 1.0530 - 1e-12
    assert all(low <= e.mean - 2 * e.se and e.mean + 2 * e.se <= high for e in estimates)
    wide = _estimates({"a": 1.0, "b": 2.0}, se=0.01)
    assert noise.loss_axis_range(wide) == pytest.approx((1.0 - 0.02, 2.0 + 0.02))


def test_a_gap_beyond_the_noise_from_one_seed_is_not_called_no_evidence():
    text = noise.noise_finding(_estimates({"a": 1.00, "b": 1.10}, se=0.01), {}, n_seeds=1)
    assert "larger than evaluation noise" in text and "one seed" in text and "no evidence" not in text


def test_a_depth_sweep_keeps_a_per_layer_pattern_by_its_period():
    """Gemma 3's five-local-one-global layout at other depths, as transformers derives it from the pattern."""
    from txviz.analysis.tradeoffs.formulas import equal_budget_shapes, layer_pattern

    gemma = ("sliding",) * 5 + ("full",)
    assert layer_pattern(gemma * 3, 4) == ("sliding",) * 4
    assert layer_pattern(gemma * 3, 13) == gemma * 2 + ("sliding",)
    assert layer_pattern(("sliding", "full") * 2, 5) == ("sliding", "full", "sliding", "full", "sliding")
    assert layer_pattern(None, 7) is None
    config = ModelConfig(vocab_size=50, d_model=64, n_layers=18, n_heads=4, n_kv_heads=1, ffn_hidden=128,
                         sliding_window=8, layer_types=gemma * 3)
    for shape in equal_budget_shapes(config, [4, 12, 24]):
        assert len(shape.layer_types) == shape.n_layers
        assert shape.layer_types == layer_pattern(config.layer_types, shape.n_layers)


def test_naive_and_sdpa_are_timed_in_turn_and_every_run_is_kept(monkeypatch):
    calls = []
    monkeypatch.setattr(timing, "naive_attention", lambda q, k, v: calls.append("naive") or q)
    monkeypatch.setattr(timing, "sdpa_attention", lambda q, k, v: calls.append("sdpa") or q)
    monkeypatch.setattr(timing, "peak_bytes", lambda fn, device: (fn(), 1, "stub"))
    monkeypatch.setattr(timing.torch.testing, "assert_close", lambda *a, **k: None)
    [row] = timing.attention_benchmark([8], n_heads=1, head_dim=4, repeats=4)
    assert calls[2:] == ["naive", "sdpa"] * 4  # after the two memory runs: alternated, so load meets both
    assert len(row.naive_runs) == len(row.sdpa_runs) == 4
    assert row.naive_s == statistics.median(row.naive_runs) and row.sdpa_s == statistics.median(row.sdpa_runs)


def test_noise_decides_where_the_runs_of_the_two_methods_overlap():
    def row(tokens, naive, sdpa):
        return timing.AttentionTiming(tokens, statistics.median(sdpa), 1, 1, statistics.median(naive), 1, 0.0, "m",
                                      tuple(naive), tuple(sdpa))

    apart, overlapping = row(512, [0.070, 0.074, 0.080], [0.010, 0.011, 0.012]), row(1024, [0.055, 0.061, 0.090],
                                                                                      [0.040, 0.050, 0.058])
    assert not apart.noise_decides and overlapping.noise_decides
    assert not timing.AttentionTiming(8, 0.01, 1, 1, None, None, None, "m", (), (0.01,)).noise_decides  # naive skipped
    notes = tables.noise_notes([apart, overlapping])
    assert any("1,024 tokens naive and SDPA" in n for n in notes)
    assert any(n.startswith("naive at 1,024 tokens has a run as fast as one at 512") for n in notes)  # 55 ms < 80 ms
    assert not tables.noise_notes([apart, row(1024, [0.300, 0.310, 0.320], [0.030, 0.031, 0.032])])


def test_equal_budget_shapes_of_a_moe_with_dense_layers_keep_its_pattern():
    """Qwen-MoE keeps some layers dense: at another depth the same repeated pattern is dense."""
    config = tiny_config(n_layers=4, n_experts=4, top_k=2, expert_hidden=16, dense_layers=(1, 3))
    shapes = tr.equal_budget_shapes(config, [2, 4, 6])
    assert [s.dense_layers for s in shapes] == [(1,), (1, 3), (1, 3, 5)]
    budget = non_embedding_params(config)
    assert all(abs(non_embedding_params(s) - budget) <= 0.05 * budget for s in shapes)


def test_equal_budget_shapes_of_a_moe_whose_experts_have_their_own_width():
    """Qwen3-MoE: every layer routed, experts expert_hidden wide, so ffn_hidden sizes nothing; the
    width search alone meets the budget."""
    config = tiny_config(n_layers=4, n_experts=4, top_k=2, expert_hidden=16)
    shapes = tr.equal_budget_shapes(config, [1, 2, 4, 8])
    assert [s.n_layers for s in shapes] == [1, 2, 4, 8]
    assert shapes[2].d_model == config.d_model
