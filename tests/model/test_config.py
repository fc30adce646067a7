"""ModelConfig checks and derived fields, the model's input checks, and the three float dtypes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import ConfigError, Decoder, InputError, KVCache, ModelConfig, RopeScaling, trace

BAD_CONFIGS = [
    (dict(n_heads=4, n_kv_heads=3), "n_heads=4 is not divisible by n_kv_heads=3"),
    (dict(d_model=30, n_heads=4), "d_model=30 is not divisible by n_heads=4; set head_dim"),
    (dict(n_heads=4, head_dim=7), "head_dim=7 must be even"),
    (dict(n_experts=4, top_k=5), "top_k=5 must be between 1 and n_experts=4"),
    (dict(n_experts=4, top_k=0), "top_k=0 must be between 1 and n_experts=4"),
    (dict(n_experts=-1), "n_experts must be >= 0"),
    (dict(vocab_size=0), "vocab_size must be a positive integer"),
    (dict(n_layers=2.5), "n_layers must be a positive integer"),
    (dict(max_seq_len=-8), "max_seq_len must be a positive integer"),
    (dict(rope_theta=0.0), "rope_theta must be > 0"),
    (dict(sliding_window=0), "sliding_window must be positive or None"),
    (dict(norm_eps=0.0), "norm_eps must be > 0"),
    (dict(rope_theta=float("nan")), "rope_theta must be > 0"),  # NaN passes a plain "<= 0" test
    (dict(n_heads=0), "n_heads must be a positive integer"),  # not a ZeroDivisionError
    (dict(n_heads="4"), "n_heads must be a positive integer"),  # not a TypeError
    (dict(rope_scaling=[1]), "rope_scaling must be a RopeScaling or a dict"),
    (dict(positions="weird"), "positions must be one of .*'alibi'.*got 'weird'"),
    (dict(norm="batchnorm"), "norm must be one of"),  # was a KeyError deep in the model's constructor
    (dict(rope_scaling={"kind": "bogus"}), "kind must be one of"),
    (dict(sliding_window="5"), "sliding_window must be int | None, got '5'"),
    (dict(tie_embeddings="yes"), "tie_embeddings must be bool"),
    (dict(norm_eps="1e-5"), "norm_eps must be float"),
    (dict(rope_scaling={"kind": "linear", "bogus": 2}), r"unknown rope_scaling fields: \['bogus'\]"),
    (dict(norm_eps=float("nan")), "norm_eps must be > 0"),
    (dict(norm_eps=float("inf")), "norm_eps must be > 0"),
]


@pytest.mark.parametrize("overrides,message", BAD_CONFIGS, ids=[m.split()[0] for _, m in BAD_CONFIGS])
def test_bad_configs_say_what_is_wrong(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        tiny_config(**overrides)


@pytest.mark.parametrize("scaling,message", [
    (dict(kind="linear", factor=0.0), "factor must be > 0"),
    (dict(kind="linear", factor=float("nan")), "factor must be > 0"),
    (dict(kind="yarn", factor=4.0), "'yarn' needs original_max_seq_len"),
    (dict(kind="llama3", factor=8.0), "'llama3' needs original_max_seq_len"),
])
def test_bad_rope_scaling_says_what_is_wrong(scaling, message):
    with pytest.raises(ConfigError, match=message):
        RopeScaling(**scaling)
    with pytest.raises(ConfigError, match=message):  # also when it arrives as a dict
        tiny_config(rope_scaling=scaling)


def test_odd_head_dim_is_fine_without_rope():
    assert tiny_config(positions="alibi", n_heads=4, head_dim=7).head_dim == 7


@pytest.mark.parametrize("n_kv_heads,kind,groups", [(None, "MHA", 1), (4, "MHA", 1), (2, "GQA", 2), (1, "MQA", 4)])
def test_attention_kind_and_groups_are_derived(n_kv_heads, kind, groups):
    config = tiny_config(n_heads=4, n_kv_heads=n_kv_heads)
    assert (config.n_kv_heads, config.attention_kind, config.n_groups) == (4 // groups, kind, groups)


def test_derived_fields():
    config = tiny_config(d_model=48, n_heads=6, rope_scaling=dict(kind="linear", factor=2.0))
    assert config.head_dim == 8
    assert config.rope_scaling == RopeScaling(kind="linear", factor=2.0)
    assert not config.is_moe and tiny_config(n_experts=2, top_k=1).is_moe
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.d_model = 64


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_config_round_trips_through_dict_and_json(variant):
    import json

    config = tiny_config(**VARIANTS[variant])
    assert ModelConfig.from_dict(config.to_dict()) == config
    assert ModelConfig.from_dict(json.loads(config.to_json())) == config


def test_unknown_fields_are_rejected():
    with pytest.raises(ConfigError, match=r"unknown ModelConfig fields: \['n_head'\]"):
        ModelConfig.from_dict({**tiny_config().to_dict(), "n_head": 4})


# ---- model inputs -------------------------------------------------------------------------------
BAD_INPUTS = {
    "empty": (torch.zeros(1, 0, dtype=torch.long), "no tokens: the prompt is empty"),
    "empty_list": ([], "no tokens: the prompt is empty"),
    "too_high": (torch.tensor([[1, 2, 97]]), r"token id out of range \[0, 97\): found 97"),
    "negative": (torch.tensor([[1, -3, 2]]), r"token id out of range \[0, 97\): found -3"),
    "over_context": (torch.zeros(1, 65, dtype=torch.long), "65 tokens exceed the model's context of 64"),
    "float": (torch.tensor([[1.0, 2.0]]), r"token ids must be integers \(int32 or int64\), got torch.float32"),
    "float_list": ([1.5, 2.7], "must be integers .*float32"),  # refused, not truncated to [1, 2]
    "bool_list": ([True, False], "must be integers .*bool"),
    "ragged": ([[1, 2], [3]], "must be a \\(batch, tokens\\) array of integers"),
    "strings": (["a", "b"], "array of integers"),
    "none": (None, "array of integers"),
    "beyond_int64": ([2**70], "array of integers"),
    "empty_batch": (torch.zeros(0, 3, dtype=torch.long), "a batch of no sequences"),
    "three_dims": (torch.zeros(1, 1, 3, dtype=torch.long), r"must be \(batch, tokens\), got shape \(1, 1, 3\)"),
}


@pytest.fixture(scope="module")
def model():
    return random_decoder(tiny_config())


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_ids_raise_input_error(model, name):
    ids, message = BAD_INPUTS[name]
    with pytest.raises(InputError, match=message):
        model(ids)
    with pytest.raises(InputError, match=message):
        trace(model, ids)


def test_cache_continuation_counts_toward_the_context(model):
    cache = KVCache(model.config, 64)
    with torch.inference_mode():
        model(torch.zeros(1, 60, dtype=torch.long), cache=cache)
        with pytest.raises(InputError, match="65 tokens exceed the model's context of 64"):
            model(torch.zeros(1, 5, dtype=torch.long), cache=cache)


def test_list_and_1d_ids_are_accepted(model):
    with torch.inference_mode():
        expected = model(torch.tensor([[3, 1, 4]]))
        assert torch.equal(model([3, 1, 4]), expected)
        assert torch.equal(model(torch.tensor([3, 1, 4], dtype=torch.int32)), expected)


# ---- dtypes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("dtype,tolerance", [(torch.bfloat16, 0.05), (torch.float16, 0.01)], ids=["bf16", "fp16"])
def test_half_precision_runs_close_to_fp32(variant, dtype, tolerance):
    config = tiny_config(**VARIANTS[variant])
    fp32 = random_decoder(config)
    half = Decoder.from_state_dict(config, fp32.state_dict(), dtype=dtype)
    ids = random_ids(config, 10)
    with torch.inference_mode():
        expected = fp32(ids)
        logits = half(ids)
        cached = torch.cat([half(ids[:, :6], cache=(cache := KVCache(config, 10, dtype=dtype))),
                            half(ids[:, 6:], cache=cache)], dim=1)
    traced = trace(half, ids, capture=("attn_probs", "logits"))
    for result in (logits, cached, traced["logits"]):
        assert result.dtype == dtype
        relative_error = (result.float() - expected).norm() / expected.norm()
        assert relative_error < tolerance
    assert traced["attn_probs"].dtype == dtype
