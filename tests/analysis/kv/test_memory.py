"""Memory formulas against real tensors and published figures, parameter counts
against real Decoders, and the KV-sharing counterfactuals (to_mha, to_kv_groups) on tiny models."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch.nn import functional as F
from torch.testing import assert_close

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import Decoder, KVCache, ModelConfig, kv_cache_bytes as model_kv_cache_bytes
from txviz import cli
from txviz.analysis.kv import memory, memory_model, presets
from txviz.analysis.kv.fit import longest_context, max_context
from txviz.analysis.kv.memory_model import MemoryModel, preset
from txviz.analysis.kv.sharing import kv_head_options, quality_vs_original, to_kv_groups, to_mha
from txviz.analysis.kv.memory import GIB, kv_cache_bytes_at, token_kv_bytes, weight_bytes
from txviz.analysis.texts import read_text
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.config import read_hf_config
from txviz.model.counts import count_active_params, count_params

# ---- KV formula = bytes of a real KVCache ----------------------------------------------------------
CACHE_CONFIGS = {
    "mha": dict(),
    "gqa": dict(n_kv_heads=2),
    "mqa": dict(n_kv_heads=1),
    "sliding_window_wraps": dict(n_kv_heads=2, sliding_window=5),
    "sliding_window_wider_than_cache": dict(sliding_window=40),
    "explicit_head_dim": dict(n_kv_heads=2, head_dim=12),
}
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}


@pytest.mark.parametrize("name", sorted(CACHE_CONFIGS))
@pytest.mark.parametrize("dtype", sorted(TORCH_DTYPES))
@pytest.mark.parametrize("tokens,batch", [(1, 1), (17, 1), (30, 3)])
def test_kv_formula_equals_real_cache_bytes(name, dtype, tokens, batch):
    config = tiny_config(**CACHE_CONFIGS[name])
    cache = KVCache(config, tokens, batch=batch, dtype=TORCH_DTYPES[dtype])
    assert kv_cache_bytes_at(config, tokens, batch, dtype) == cache.nbytes
    assert kv_cache_bytes_at(config, tokens, batch, dtype) == model_kv_cache_bytes(
        config, tokens, batch, memory.DTYPE_BYTES[dtype])


@pytest.mark.parametrize("name", sorted(CACHE_CONFIGS))
def test_int4_cache_is_half_of_a_real_one_byte_cache(name):
    """No torch dtype holds 4 bits: an int4 cache packs two values per byte of a uint8 buffer."""
    config = tiny_config(**CACHE_CONFIGS[name])
    cache = KVCache(config, 17, batch=2, dtype=torch.uint8)
    assert kv_cache_bytes_at(config, 17, 2, "int4") * 2 == cache.nbytes
    assert token_kv_bytes(config, "int4") == 2 * config.n_layers * config.n_kv_heads * config.head_dim // 2


def test_per_token_bytes_is_what_a_filled_cache_grows_by():
    config = tiny_config(n_kv_heads=2)
    model = random_decoder(config)
    cache = KVCache(config, 8)
    with torch.inference_mode():
        model(random_ids(config, 5), cache=cache)
    assert sum(cache.used_nbytes_per_layer()) == 5 * token_kv_bytes(config, "fp32")


# ---- published figures, from first principles ------------------------------------------------------
# 2 (K and V) · layers · kv_heads · head_dim · bytes, per token, batch 1
PER_TOKEN = [
    ("llama-2-7b", "fp16", 2 * 32 * 32 * 128 * 2),  # 524,288 B = 0.5 MiB
    ("llama-2-13b", "fp16", 2 * 40 * 40 * 128 * 2),  # 819,200 B
    ("llama-2-70b", "fp16", 2 * 80 * 8 * 128 * 2),  # 327,680 B: GQA-8
    ("llama-3-8b", "bf16", 2 * 32 * 8 * 128 * 2),  # 131,072 B
    ("llama-3-70b", "bf16", 2 * 80 * 8 * 128 * 2),
    ("llama-3.1-405b", "bf16", 2 * 126 * 8 * 128 * 2),  # 516,096 B
    ("mistral-7b-v0.1", "bf16", 2 * 32 * 8 * 128 * 2),
    ("mixtral-8x7b", "bf16", 2 * 32 * 8 * 128 * 2),
    ("qwen2.5-7b", "bf16", 2 * 28 * 4 * 128 * 2),  # 57,344 B
    ("gemma-7b", "bf16", 2 * 28 * 16 * 256 * 2),  # head_dim 256, not 3072/16
    ("falcon-7b", "bf16", 2 * 32 * 1 * 64 * 2),  # MQA: 8,192 B
    ("gpt2", "fp32", 2 * 12 * 12 * 64 * 4),
    ("smollm2-135m", "bf16", 2 * 30 * 3 * 64 * 2),  # 23,040 B
    ("deepseek-v3", "bf16", 61 * (512 + 64) * 2),  # MLA: latent + shared RoPE key, 70,272 B
    ("deepseek-v3", "fp8", 61 * (512 + 64) * 1),
]


@pytest.mark.parametrize("name,dtype,expected", PER_TOKEN, ids=[f"{n}-{d}" for n, d, _ in PER_TOKEN])
def test_published_bytes_per_token(name, dtype, expected):
    assert token_kv_bytes(preset(name), dtype) == expected
    assert kv_cache_bytes_at(preset(name), 1000, 4, dtype) == expected * 1000 * 4


def test_llama_2_7b_is_half_a_mib_per_token_and_2_gib_at_4k():
    assert token_kv_bytes(preset("llama-2-7b"), "fp16") == 0.5 * 2**20
    assert kv_cache_bytes_at(preset("llama-2-7b"), 4096, 1, "fp16") == 2 * GIB


def test_mistral_window_caps_the_cache_at_4096_tokens():
    mistral, per_token = preset("mistral-7b-v0.1"), 2 * 32 * 8 * 128 * 2
    assert kv_cache_bytes_at(mistral, 1000, 1, "bf16") == 1000 * per_token
    assert kv_cache_bytes_at(mistral, 4096, 1, "bf16") == 4096 * per_token == GIB // 2
    assert kv_cache_bytes_at(mistral, 32768, 2, "bf16") == 2 * 4096 * per_token


def test_gemma_2_windows_only_half_its_layers():
    per_layer_token = 2 * 8 * 256 * 2  # GQA-8, head_dim 256, bf16
    assert kv_cache_bytes_at(preset("gemma-2-9b"), 8192, 1, "bf16") == per_layer_token * (21 * 8192 + 21 * 4096)


def test_kinds():
    kinds = {name: preset(name).kind for name in presets.PRESETS}
    assert kinds["llama-2-7b"] == kinds["gemma-7b"] == kinds["gpt2"] == "MHA"
    assert kinds["llama-3-8b"] == kinds["smollm2-135m"] == "GQA"
    assert kinds["falcon-7b"] == "MQA" and kinds["deepseek-v3"] == "MLA"


# ---- parameters of published shapes -----------------------------------------------------------------
def llama(layers, d, heads, kv, ffn, vocab, **extra) -> ModelConfig:
    return ModelConfig(vocab_size=vocab, d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv, ffn_hidden=ffn,
                       **extra)


# Shapes from each config.json, written out; the preset's n_params must be their exact count.
PUBLISHED_SHAPES = {
    "llama-2-7b": llama(32, 4096, 32, 32, 11008, 32000),
    "llama-2-13b": llama(40, 5120, 40, 40, 13824, 32000),
    "llama-2-70b": llama(80, 8192, 64, 8, 28672, 32000),
    "llama-3-8b": llama(32, 4096, 32, 8, 14336, 128256),
    "llama-3-70b": llama(80, 8192, 64, 8, 28672, 128256),
    "llama-3.1-405b": llama(126, 16384, 128, 8, 53248, 128256),
    "mistral-7b-v0.1": llama(32, 4096, 32, 8, 14336, 32000, sliding_window=4096),
    "mixtral-8x7b": llama(32, 4096, 32, 8, 14336, 32000, n_experts=8, top_k=2),
    "qwen2.5-7b": llama(28, 3584, 28, 4, 18944, 152064, qkv_bias=True),
    "gemma-7b": llama(28, 3072, 16, 16, 24576, 256000, head_dim=256, tie_embeddings=True),  # GeGLU: SwiGLU's shapes
    "gpt2": ModelConfig(vocab_size=50257, d_model=768, n_layers=12, n_heads=12, ffn_hidden=3072, max_seq_len=1024,
                        norm="layernorm", ffn="gelu_mlp", positions="learned", tie_embeddings=True,
                        qkv_bias=True, out_bias=True, mlp_bias=True),
    "smollm2-135m": llama(30, 576, 9, 3, 1536, 49152, tie_embeddings=True),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_SHAPES))
def test_preset_parameter_counts_match_their_shapes(name):
    config, published = PUBLISHED_SHAPES[name], preset(name)
    assert count_params(config) == published.n_params
    assert count_active_params(config) == (published.active_params or published.n_params)
    assert token_kv_bytes(config, "bf16") == token_kv_bytes(published, "bf16")


def test_llama_2_7b_decoder_has_6_738_415_616_parameters():
    with torch.device("meta"):
        decoder = Decoder(PUBLISHED_SHAPES["llama-2-7b"])
    assert sum(p.numel() for p in decoder.parameters()) == 6_738_415_616


@pytest.mark.parametrize("dtype,bytes_per_weight", [("fp32", 4), ("bf16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)])
def test_weight_bytes(dtype, bytes_per_weight):
    assert weight_bytes(preset("llama-3-8b"), dtype) == 8_030_261_248 * bytes_per_weight
    assert weight_bytes(tiny_config(), dtype) == math.ceil(count_params(tiny_config()) * bytes_per_weight)


# ---- what fits a GPU ------------------------------------------------------------------------------------
def test_llama_2_7b_on_24_gib():
    fit = max_context(preset("llama-2-7b"), 24, kv_dtype="fp16", weight_dtype="fp16")
    free = 24 * GIB - 6_738_415_616 * 2
    assert (fit.free_bytes, fit.max_tokens) == (free, free // 524_288) == (free, 23_446)
    assert fit.usable_tokens == 4096 and not fit.unbounded_by_kv


def test_a_window_on_every_layer_is_unbounded_by_kv():
    fit = max_context(preset("mistral-7b-v0.1"), 16, batch=4)
    assert fit.unbounded_by_kv and fit.max_tokens is None and "unbounded" in fit.note
    assert fit.usable_tokens == 32768
    small = max_context(preset("mistral-7b-v0.1"), 14, batch=4)  # 0.5 GiB a sequence no longer fits 4 times
    assert small.max_tokens is not None and small.max_tokens < 4096


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
@pytest.mark.parametrize("gib,batch,kv_dtype", [(16, 1, "bf16"), (80, 8, "fp8"), (141, 32, "int4"), (2000, 1, "fp32")])
def test_max_tokens_is_the_longest_that_fits(name, gib, batch, kv_dtype):
    model = preset(name)
    fit = max_context(model, gib, batch=batch, kv_dtype=kv_dtype)
    if fit.free_bytes < 0:
        assert fit.max_tokens == 0 and "do not fit" in fit.note
    elif fit.max_tokens is None:
        assert model.window_layers == model.n_layers
        assert kv_cache_bytes_at(model, 10**9, batch, kv_dtype) <= fit.free_bytes
    else:
        assert kv_cache_bytes_at(model, fit.max_tokens, batch, kv_dtype) <= fit.free_bytes
        assert kv_cache_bytes_at(model, fit.max_tokens + 1, batch, kv_dtype) > fit.free_bytes


@pytest.mark.parametrize("kwargs", [dict(gpu_gib=0), dict(gpu_gib=-1), dict(gpu_gib=math.inf),
                                    dict(gpu_gib=math.nan), dict(gpu_gib=8, batch=0), dict(gpu_gib=8, reserve_gib=-1)])
def test_max_context_rejects_bad_inputs(kwargs):
    with pytest.raises(ValueError):
        max_context(preset("gpt2"), **kwargs)


# ---- series and checks -------------------------------------------------------------------------------
def test_chart_series_are_plain_lists():
    models = {kind: preset(name) for kind, name in presets.KIND_EXAMPLES.items()}
    series = memory.kv_vs_context(models, memory.context_lengths(8192, start=1024), kv_dtype="fp16")
    assert series["tokens"] == [1024, 2048, 4096, 8192]
    assert series["bytes"]["MHA"] == [n * 524_288 for n in series["tokens"]]
    assert json.loads(json.dumps(series)) == series
    by_batch = memory.kv_vs_batch(preset("llama-3-8b"), [1, 2, 8], tokens=1000)
    assert by_batch["kv_bytes"] == [b * 1000 * 131_072 for b in (1, 2, 8)]
    assert by_batch["total_bytes"][0] == by_batch["weight_bytes"] + by_batch["kv_bytes"][0]
    assert memory.context_lengths(5000, start=1024) == [1024, 2048, 4096, 5000]


def test_kind_variants_change_only_the_kv_heads():
    variants = memory_model.kind_variants(preset("llama-2-7b"))
    assert {k: v.kv_heads for k, v in variants.items()} == {"MHA": 32, "GQA": 8, "MQA": 1}
    assert {k: v.kind for k, v in variants.items()} == {"MHA": "MHA", "GQA": "GQA", "MQA": "MQA"}
    assert set(memory_model.kind_variants(preset("falcon-7b"))) == {"MHA", "MQA"}  # 71 heads: no groups
    assert memory_model.kind_variants(preset("smollm2-135m"))["GQA"].kv_heads == 3
    with pytest.raises(ValueError, match="latent"):
        memory_model.kind_variants(preset("deepseek-v3"))


@pytest.mark.parametrize("fields,message", [
    (dict(kv_heads=5), "not divisible"), (dict(n_layers=0), "n_layers must be a positive"),
    (dict(rope_dim=64), "needs latent_dim"), (dict(sliding_window=8, window_layers=13), "window_layers=13"),
    (dict(sliding_window=0), "sliding_window must be positive"),
])
def test_memory_model_checks(fields, message):
    base = dict(name="m", n_layers=12, n_heads=12, kv_heads=12, head_dim=64, n_params=1000)
    with pytest.raises(ValueError, match=message):
        MemoryModel(**{**base, **fields})


def test_unknown_preset_and_dtype():
    with pytest.raises(ValueError, match="unknown preset 'llama-9'; choose from: gpt2"):
        preset("llama-9")
    with pytest.raises(ValueError, match="unknown dtype 'fp4'"):
        token_kv_bytes(preset("gpt2"), "fp4")


# ---- counterfactuals on tiny models -----------------------------------------------------------------
SHARED_KV = ["gqa", "mqa", "sliding_window", "moe"]
EXTRA_SHARED = {"alibi_gqa": dict(positions="alibi", n_kv_heads=2),
                "learned_biases_mqa": dict(VARIANTS["learned"], n_kv_heads=1)}


def shared_kv_config(name: str) -> ModelConfig:
    return tiny_config(**(VARIANTS.get(name) or EXTRA_SHARED[name]))


@pytest.mark.parametrize("name", SHARED_KV + sorted(EXTRA_SHARED))
def test_to_mha_keeps_logits(name):
    """Same function: equal to float64 rounding. In float32 the grouped and ungrouped attention kernels
    sum in different orders, so the logits differ by a few ulps (~3e-6 seen)."""
    config = shared_kv_config(name)
    model = random_decoder(config).double()
    mha = to_mha(model)
    ids = random_ids(config, 12, batch=2)
    assert mha.config.n_kv_heads == config.n_heads and mha.config.attention_kind == "MHA"
    assert next(mha.parameters()).dtype == torch.float64
    with torch.inference_mode():
        expected = model(ids)
        assert_close(mha(ids), expected, rtol=1e-12, atol=1e-12)
        assert_close(to_mha(model.float())(ids), expected.float(), rtol=1e-5, atol=1e-5)
        cache = KVCache(mha.config, 12, batch=2, dtype=torch.float64)
        stepped = torch.cat([mha(ids[:, i:i + 1], cache=cache) for i in range(12)], dim=1)
    assert_close(stepped, expected, rtol=1e-12, atol=1e-12)


def test_to_mha_keeps_the_dtype():
    model = random_decoder(tiny_config(n_kv_heads=2)).to(torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in to_mha(model).parameters())


@pytest.mark.parametrize("name", SHARED_KV)
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_to_kv_groups_scales_the_real_cache_and_leaves_the_original_alone(name, n_kv_heads):
    config = shared_kv_config(name)
    model = random_decoder(config)
    ids = random_ids(config, 12)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.inference_mode():
        logits_before = model(ids)
    variant = to_kv_groups(model, n_kv_heads)
    with torch.no_grad():  # scribble on every variant tensor: none may be the original's
        for param in variant.parameters():
            param.add_(1.0)
    old_bytes, new_bytes = KVCache(config, 12).nbytes, KVCache(variant.config, 12).nbytes
    assert old_bytes * n_kv_heads == new_bytes * config.n_kv_heads
    report = quality_vs_original(model, variant, ids)
    assert (report.kv_bytes_original, report.kv_bytes_variant) == (old_bytes, new_bytes)
    with torch.inference_mode():
        assert torch.equal(model(ids), logits_before)
    for key, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[key])


def test_merging_averages_the_kv_heads_of_each_group():
    config = tiny_config(n_kv_heads=4, qkv_bias=True)  # 4 heads of head_dim 8
    model = random_decoder(config)
    pairs = to_kv_groups(model, 2)
    for proj in ("k_proj", "v_proj"):
        for part in ("weight", "bias"):
            old = getattr(getattr(model.layers[1].attn, proj), part).reshape(4, 8, -1)
            new = getattr(getattr(pairs.layers[1].attn, proj), part).reshape(2, 8, -1)
            assert_close(new, torch.stack([(old[0] + old[1]) / 2, (old[2] + old[3]) / 2]))


def test_groups_that_do_not_nest_take_a_weighted_mean():
    """6 query heads, 2 KV heads (groups of 3) → 3 KV heads (groups of 2): the middle group holds query
    heads 2 and 3, which read old heads 0 and 1."""
    config = tiny_config(n_heads=6, n_kv_heads=2, head_dim=8)
    model = random_decoder(config)
    old = model.layers[0].attn.k_proj.weight.reshape(2, 8, -1)
    new = to_kv_groups(model, 3).layers[0].attn.k_proj.weight.reshape(3, 8, -1)
    assert_close(new, torch.stack([old[0], (old[0] + old[1]) / 2, old[1]]))
    assert kv_head_options(config) == {
        1: "merge: each new KV head is the mean of 2 old ones", 2: "unchanged",
        3: "straddle: some new groups span two old ones and take their weighted mean",
        6: "repeat: each old KV head is copied into 3 (exact)"}


def test_repeat_then_merge_back_is_the_original():
    config = tiny_config(n_kv_heads=2, qkv_bias=True)
    model = random_decoder(config)
    back = to_kv_groups(to_mha(model), 2)
    for key, tensor in model.state_dict().items():
        assert_close(back.state_dict()[key], tensor, rtol=0, atol=1e-7)


@pytest.mark.parametrize("n_kv_heads", [0, 3, 5, 8])
def test_to_kv_groups_refuses_unequal_groups(n_kv_heads):
    model = random_decoder(tiny_config(n_kv_heads=2))
    message = f"n_kv_heads={n_kv_heads} does not divide n_heads=4.*choose from \\[1, 2, 4\\]"
    with pytest.raises(ValueError, match=message):
        to_kv_groups(model, n_kv_heads)


def test_identity_variant_has_zero_kl_full_agreement_equal_perplexity():
    config = tiny_config(n_kv_heads=2)
    model = random_decoder(config)
    ids = random_ids(config, 16)
    report = quality_vs_original(model, to_kv_groups(model, 2), ids[0])
    assert report.mean_kl == 0 and report.top1_agreement == 1
    assert report.perplexity_variant == report.perplexity_original
    with torch.inference_mode():
        nll = F.cross_entropy(model(ids)[0, :-1], ids[0, 1:])
    assert report.perplexity_original == pytest.approx(math.exp(nll), rel=1e-5)
    assert report.n_predictions == 15 == len(report.kl_per_position)


def test_merged_heads_change_the_predictions():
    config = tiny_config(n_kv_heads=4)
    model = random_decoder(config)
    report = quality_vs_original(model, to_kv_groups(model, 1), random_ids(config, 16))
    assert report.mean_kl > 0 and report.kv_bytes_original == 4 * report.kv_bytes_variant
    with pytest.raises(ValueError, match="at least 2 tokens"):
        quality_vs_original(model, model, random_ids(config, 1))


# ---- shipped text ---------------------------------------------------------------------------------
def test_shipped_text_is_plain_english_prose():
    text = read_text()
    assert 600 <= len(text.split()) <= 900 and text.isascii()
    with pytest.raises(ValueError, match="no shipped text"):
        read_text("missing")


# ---- CLI --------------------------------------------------------------------------------------------
def run_cli(capsys, *argv) -> tuple[int, dict]:
    code = cli.main(["memory", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_cli_preset_json(capsys):
    code, out = run_cli(capsys, "--preset", "llama-2-7b", "--seq", "4096", "--batch", "2", "--kv-dtype", "fp16",
                        "--gpu-gib", "80")
    assert code == 0
    assert out["kv_bytes_per_token"] == 524_288 and out["kv_cache_bytes"] == 2 * 4096 * 524_288
    assert out["weight_bytes"] == 2 * 6_738_415_616 and out["kind"] == "MHA"
    assert out["max_context"]["max_tokens"] == (80 * GIB - 2 * 6_738_415_616) // (2 * 524_288)


def test_cli_config_file_matches_the_library(capsys, tmp_path):
    raw = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096, intermediate_size=14336,
               num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
               max_position_embeddings=8192, rope_theta=500000.0)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    code, out = run_cli(capsys, "--config", str(path), "--seq", "8192", "--weight-dtype", "int4")
    assert code == 0 and out["kind"] == "GQA" and out["kv_bytes_per_token"] == 131_072
    assert out["kv_cache_bytes"] == 8192 * 131_072 and out["weight_bytes"] == 8_030_261_248 // 2
    assert "max_context" not in out


def test_cli_list(capsys):
    code, out = run_cli(capsys, "--list")
    assert code == 0 and [row["preset"] for row in out["presets"]] == list(presets.PRESETS)


@pytest.mark.parametrize("content,message", [
    (None, "unknown preset"), ("{not json", "not valid JSON"), ("[1, 2]", "must hold a JSON object"),
    ('{"model_type": "bert"}', "lacks the numbers its size needs: "), (" " * (1 << 20) + "{}", "too large"),
])
def test_cli_bad_inputs_exit_2(capsys, tmp_path, content, message):
    if content is None:
        argv = ["--preset", "llama-9"]
    else:
        path = tmp_path / "config.json"
        path.write_text(content)
        argv = ["--config", str(path)]
    code, out = run_cli(capsys, *argv)
    assert code == 2 and message in out["error"]


def test_cli_missing_file_and_bad_numbers_exit_2(capsys, tmp_path):
    assert run_cli(capsys, "--config", str(tmp_path / "none.json"))[0] == 2
    assert run_cli(capsys, "--preset", "gpt2", "--seq", "0")[0] == 2
    assert run_cli(capsys, "--preset", "gpt2", "--gpu-gib", "-3")[0] == 2


USAGE_ERRORS = [["--preset", "gpt2", "--config", "x.json"], ["--preset", "gpt2", "--kv-dtype", "fp4"], []]


@pytest.mark.parametrize("argv", USAGE_ERRORS)
def test_cli_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["memory", *argv])
    assert exit_info.value.code == 2


# ---- the default model ------------------------------------------------------------------------------
@pytest.mark.default_model
def test_to_mha_keeps_the_default_models_logits(default_model):
    ids = torch.tensor(default_model.tokenizer.encode(read_text()[:600]).ids)
    mha = to_mha(default_model.model)
    with torch.inference_mode():
        assert_close(mha(ids), default_model.model(ids), rtol=1e-5, atol=1e-5)
    assert count_params(default_model.config) == default_model.n_params == preset("smollm2-135m").n_params


# ---- the whole bill: weights + KV cache + activations ---------------------------------------------------
def test_llama_2_7b_fp16_bill_by_hand_from_its_config_json():
    from tests.helpers.published_hf_configs import LLAMA_2_7B as c

    d, ffn, vocab, layers = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
    head_dim = d // heads
    # per layer: q, k, v, o; gate, up, down; two RMSNorm weights. Untied embedding and LM head; a final norm
    params = layers * (d * head_dim * (2 * heads + 2 * kv_heads) + 3 * d * ffn + 2 * d) + 2 * vocab * d + d
    assert params == 6_738_415_616
    assert params * 2 / 1e9 == pytest.approx(13.48, abs=0.01)  # "Llama 2 7B takes ≈ 13.5 GB in fp16"
    tokens = 4096
    kv = 2 * layers * kv_heads * head_dim * 2 * tokens  # K and V, fp16
    activations = tokens * (2 * d + (heads + 2 * kv_heads) * head_dim + 2 * ffn) * 2 + vocab * 4
    for spec in (preset("llama-2-7b"), MemoryModel.from_config(read_hf_config(c))):
        bill = memory.memory_bill(spec, tokens, weight_dtype="fp16", kv_dtype="fp16")
        assert (bill.weights, bill.kv_cache, bill.activations) == (params * 2, kv, activations)
        assert bill.total == params * 2 + 2 * GIB + 348_255_232
        assert bill.total / 1e9 == pytest.approx(15.97, abs=0.01)


def test_activations_stop_growing_at_the_prefill_chunk_and_follow_the_compute_dtype():
    model = preset("llama-3-8b")
    width = 2 * 4096 + (32 + 2 * 8) * 128 + 2 * 14336
    assert memory.activation_bytes(model, 1000, batch=3) == 3 * 1000 * width * 2 + 3 * 128256 * 4
    chunked = [memory.activation_bytes(model, t, prefill_chunk=2048) for t in (2048, 8192, 131072)]
    assert chunked == [2048 * width * 2 + 128256 * 4] * 3
    assert memory.activation_bytes(model, 0) == 0
    assert memory.activation_dtype("int4") == memory.activation_dtype("bf16") == "bf16"
    assert memory.memory_bill(model, 100, weight_dtype="fp32").activations == 100 * width * 4 + 128256 * 4
    with pytest.raises(ValueError):
        memory.activation_bytes(model, 10, prefill_chunk=0)


def test_a_moe_counts_the_experts_a_token_runs_through():
    mixtral = preset("mixtral-8x7b")
    assert mixtral.ffn_width == 2 * 14336  # top-2 of 8
    config = tiny_config(n_experts=4, top_k=2)
    assert MemoryModel.from_config(config).ffn_width == 2 * config.ffn_hidden


@pytest.mark.parametrize("name", sorted(PUBLISHED_SHAPES))
def test_preset_widths_are_those_of_their_config(name):
    config, published = PUBLISHED_SHAPES[name], preset(name)
    derived = MemoryModel.from_config(config)
    assert (published.d_model, published.ffn_width, published.vocab_size) == \
        (derived.d_model, derived.ffn_width, derived.vocab_size)


@pytest.mark.parametrize("name", ["llama-2-7b", "llama-3-8b", "mixtral-8x7b", "gemma-2-9b", "smollm2-135m"])
@pytest.mark.parametrize("gib,settings", [(24, dict()), (80, dict(batch=8, kv_dtype="fp8")),
                                          (141, dict(prefill_chunk=2048, weight_dtype="int4"))])
def test_longest_context_is_the_last_that_fits_the_whole_bill(name, gib, settings):
    model = preset(name)
    longest = longest_context(model, gib, **settings)
    if longest == 0:
        assert memory.memory_bill(model, 1, **settings).total > gib * GIB
    else:
        assert memory.memory_bill(model, longest, **settings).total <= gib * GIB
        assert memory.memory_bill(model, longest + 1, **settings).total > gib * GIB


def test_windows_everywhere_and_a_chunked_prefill_fit_any_context():
    assert longest_context(preset("mistral-7b-v0.1"), 80, prefill_chunk=2048) is None
    assert longest_context(preset("mistral-7b-v0.1"), 80) is not None  # a whole-prompt prefill grows
    assert longest_context(preset("llama-3-70b"), 80) == 0  # 141 GB of bf16 weights
    series = memory.bill_vs_context(preset("gpt2"), [256, 1024], kv_dtype="fp32")
    assert series["total"] == [w + k + a for w, k, a in zip(series["weights"], series["kv_cache"], series["activations"])]
    assert json.loads(json.dumps(series)) == series


def test_an_uploaded_config_is_named_after_what_it_describes():
    from tests.helpers.published_hf_configs import LLAMA_3_8B

    plain = MemoryModel.from_config_json(json.dumps(LLAMA_3_8B).encode(), "config.json")
    assert plain.name == "LlamaForCausalLM, 8.03 B params, 32 layers × 4096"
    assert plain.source == "uploaded file config.json"
    by_file = MemoryModel.from_config_json(json.dumps(LLAMA_3_8B).encode(), "llama3-8b.json")
    assert by_file.name == "llama3-8b (LlamaForCausalLM, 8.03 B params, 32 layers × 4096)"
    named = {**LLAMA_3_8B, "_name_or_path": "meta-llama/Meta-Llama-3-8B"}
    by_path = MemoryModel.from_config_json(json.dumps(named).encode(), "config.json")
    assert by_path.name.startswith("Meta-Llama-3-8B (") and "meta-llama/Meta-Llama-3-8B" in by_path.source
    assert token_kv_bytes(plain) == token_kv_bytes(preset("llama-3-8b"))
    with pytest.raises(ModelLoadError):
        MemoryModel.from_config_json(b"{not json", "config.json")


@pytest.mark.parametrize("context", [64, 100, 256, 8192, 40960])
def test_charted_lengths_rise_and_stay_within_the_context(context):
    # a 64-token model was charted at 256 then 64: past its context, and out of order on the chart's axis
    lengths = memory.context_lengths(context)
    assert lengths == sorted(set(lengths)) and lengths[-1] == context and len(lengths) >= 3
