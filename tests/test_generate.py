"""Generation: greedy parity with transformers, sampling, stopping, and the cache's memory
at every step."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import needs_transformers
from tests.helpers.tiny import VARIANTS, random_decoder, random_ids, tiny_config
from txviz import Decoder, InputError, ModelConfig, RopeScaling, kv_cache_bytes
from txviz.generate import GREEDY, Generation, Sampling, Step, filter_logits, generate, sample_token

# ---- greedy parity with transformers' LlamaForCausalLM ------------------------------------------
HF_TO_OURS = {  # transformers Llama name → txviz name; {i} is the layer
    "model.embed_tokens.weight": "embed.weight",
    "model.norm.weight": "final_norm.weight",
    "lm_head.weight": "lm_head.weight",
    "model.layers.{i}.input_layernorm.weight": "layers.{i}.attn_norm.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "layers.{i}.ffn_norm.weight",
    **{f"model.layers.{{i}}.self_attn.{p}_proj.weight": f"layers.{{i}}.attn.{p}_proj.weight" for p in "qkvo"},
    **{f"model.layers.{{i}}.mlp.{p}_proj.weight": f"layers.{{i}}.ffn.{p}_proj.weight" for p in ("gate", "up", "down")},
}

HF_VARIANTS = {
    "mha": dict(num_key_value_heads=4),
    "gqa": dict(num_key_value_heads=2),
    "mqa": dict(num_key_value_heads=1),
    "tied_llama3_rope": dict(num_key_value_heads=2, tie_word_embeddings=True,
                             rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                              "original_max_position_embeddings": 16}),
}


def hf_llama(**overrides):
    transformers = pytest.importorskip("transformers")
    settings = dict(vocab_size=97, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                    max_position_embeddings=64, rms_norm_eps=1e-5, initializer_range=0.2,
                    tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**settings, **overrides})).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1 + 0.1 * torch.randn_like(param))
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def our_config(hf_config) -> ModelConfig:
    rope = dict(hf_config.rope_parameters)
    scaling = RopeScaling() if rope["rope_type"] == "default" else RopeScaling(
        kind=rope["rope_type"], factor=rope["factor"], original_max_seq_len=rope["original_max_position_embeddings"],
        low_freq_factor=rope["low_freq_factor"], high_freq_factor=rope["high_freq_factor"])
    return ModelConfig(vocab_size=hf_config.vocab_size, d_model=hf_config.hidden_size,
                       n_layers=hf_config.num_hidden_layers, n_heads=hf_config.num_attention_heads,
                       n_kv_heads=hf_config.num_key_value_heads, ffn_hidden=hf_config.intermediate_size,
                       norm_eps=hf_config.rms_norm_eps, rope_theta=rope["rope_theta"], rope_scaling=scaling,
                       max_seq_len=hf_config.max_position_embeddings,
                       tie_embeddings=hf_config.tie_word_embeddings)


def convert(hf_model) -> Decoder:
    config = our_config(hf_model.config)
    hf_state = hf_model.state_dict()
    state = {}
    for hf_pattern, our_pattern in HF_TO_OURS.items():
        for i in range(config.n_layers):
            hf_name = hf_pattern.format(i=i)
            if hf_name in hf_state and not (config.tie_embeddings and hf_name == "lm_head.weight"):
                state[our_pattern.format(i=i)] = hf_state[hf_name]
    return Decoder.from_state_dict(config, state)


@needs_transformers
@pytest.mark.parametrize("variant", sorted(HF_VARIANTS))
def test_greedy_generation_equals_transformers(variant):
    hf_model = hf_llama(**HF_VARIANTS[variant])
    model = convert(hf_model)
    prompt = random_ids(model.config, 7)
    with torch.inference_mode():
        assert_close(model(prompt), hf_model(prompt).logits, rtol=1e-5, atol=1e-5)
        expected = hf_model.generate(prompt, max_new_tokens=25, do_sample=False)[0, 7:].tolist()
    generation = generate(model, prompt, 25)
    assert list(generation.new_ids) == expected
    assert len(set(expected)) > 3  # a real sequence, not one token repeated


# ---- sampling -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return random_decoder(tiny_config(n_kv_heads=2))


def sampled(model, **settings) -> tuple[int, ...]:
    return generate(model, [5, 17, 3], 20, sampling=Sampling(**settings)).new_ids


@pytest.mark.parametrize("settings", [dict(temperature=1.0), dict(temperature=0.7, top_k=10),
                                      dict(temperature=1.3, top_p=0.9), dict(temperature=1.0, top_k=20, top_p=0.8)])
def test_sampling_is_reproducible_with_a_seed_and_varies_across_seeds(model, settings):
    first = sampled(model, seed=1, **settings)
    assert sampled(model, seed=1, **settings) == first
    # one of four other seeds differs; any() stops at the first that does (each run: 20 decode steps)
    assert any(sampled(model, seed=seed, **settings) != first for seed in (0, 2, 3, 4))


@pytest.mark.parametrize("settings", [dict(temperature=1.0, top_k=1), dict(temperature=5.0, top_k=1),
                                      dict(temperature=1.0, top_p=1e-6), dict(temperature=0.0, top_k=40)])
def test_sampling_that_keeps_one_token_is_greedy(model, settings):
    greedy = generate(model, [5, 17, 3], 20).new_ids
    assert sampled(model, seed=3, **settings) == greedy


@needs_transformers
@pytest.mark.parametrize("top_k", [1, 3, 50, 200])
@pytest.mark.parametrize("top_p", [None, 0.05, 0.5, 0.9, 1.0])
def test_filters_keep_the_same_tokens_as_transformers(top_k, top_p):
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    logits = torch.randn(4, 97, generator=torch.Generator().manual_seed(top_k)) * 3
    expected = TopKLogitsWarper(top_k)(None, logits)  # transformers applies top-k before top-p too
    if top_p is not None:
        expected = TopPLogitsWarper(top_p)(None, expected)
    kept = torch.isfinite(filter_logits(logits, top_k, top_p))
    assert torch.equal(kept, torch.isfinite(expected))
    assert_close(filter_logits(logits, top_k, top_p)[kept], logits[kept])


def test_sampled_frequencies_follow_the_tempered_softmax():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])
    sampling = Sampling(temperature=0.5, top_k=3, seed=0)
    generator = sampling.generator()
    draws = torch.stack([sample_token(logits, sampling, generator) for _ in range(4000)])
    frequencies = torch.bincount(draws[:, 0], minlength=5).float() / 4000
    expected = torch.softmax(torch.tensor([2.0, 1.0, 0.5]) / 0.5, dim=0)
    assert_close(frequencies[:3], expected, rtol=0, atol=0.03)
    assert frequencies[3:].sum() == 0


@pytest.mark.parametrize("settings,message", [
    (dict(temperature=-1.0), "temperature must be"), (dict(temperature=float("nan")), "temperature must be"),
    (dict(top_k=0), "top_k must be a positive integer"), (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
    (dict(top_p=1.5), r"top_p must be in \(0, 1\]"),
])
def test_bad_sampling_settings_raise(settings, message):
    with pytest.raises(ValueError, match=message):
        Sampling(**settings)


# ---- stopping, progress, validation -------------------------------------------------------------
def test_stop_ids_stop_after_emitting_the_stop_token(model):
    free = generate(model, [5, 17, 3], 20)
    stop_token = free.new_ids[4]
    first = free.new_ids.index(stop_token)
    stopped = generate(model, [5, 17, 3], 20, stop_ids=[stop_token, 96])
    assert stopped.new_ids == free.new_ids[:first + 1]
    assert stopped.stop_reason == "stop_id" and free.stop_reason == "max_new_tokens"
    assert stopped.ids == (5, 17, 3) + stopped.new_ids


def test_on_step_sees_every_step_in_order(model):
    seen: list[Step] = []
    generation = generate(model, [5, 17, 3], 6, on_step=seen.append)
    assert tuple(seen) == generation.steps
    assert [s.index for s in seen] == list(range(6))
    assert [s.position for s in seen] == list(range(3, 9))
    assert [s.tokens_computed for s in seen] == [3, 1, 1, 1, 1, 1]
    assert all(s.seconds > 0 for s in seen)
    assert generation.total_seconds == pytest.approx(sum(s.seconds for s in seen))


@pytest.mark.parametrize("prompt,max_new_tokens,message", [
    ([1, 2], -1, "max_new_tokens must be an integer >= 0"),
    ([1, 2], 2.5, "max_new_tokens must be an integer >= 0"),
    ([1] * 60, 5, "prompt of 60 tokens \\+ 5 new tokens = 65 exceeds the model's context of 64"),
    ([], 3, "the prompt is empty"),
    ([1, 200], 3, "token id out of range"),
    ([[1, 2], [3, 4]], 3, "one prompt at a time, got a batch of 2"),
])
def test_bad_requests_raise_input_error(model, prompt, max_new_tokens, message):
    with pytest.raises(InputError, match=message):
        generate(model, prompt, max_new_tokens)


def test_zero_new_tokens_and_exactly_full_context(model):
    empty = generate(model, [1, 2], 0)
    assert empty.new_ids == () and empty.steps == () and isinstance(empty, Generation)
    assert len(generate(model, [1] * 60, 4).new_ids) == 4  # 64 = the whole context


# ---- the cache, measured ------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["mha", "gqa", "mqa", "sliding_window", "moe", "learned"])
def test_cache_bytes_equal_the_formula_at_every_step(variant):
    config = tiny_config(**VARIANTS[variant])
    generation = generate(random_decoder(config), random_ids(config, 3), 12)
    for step in generation.steps:  # the cache holds every token before the one just produced
        assert step.cache_bytes == kv_cache_bytes(config, step.position, bytes_per_element=4)
        assert step.cache_bytes_per_layer == (step.cache_bytes // config.n_layers,) * config.n_layers
    assert generation.cache_capacity_bytes == kv_cache_bytes(config, 3 + 12, bytes_per_element=4)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_uncached_generation_gives_the_same_greedy_tokens(variant):
    config = tiny_config(**VARIANTS[variant])
    model, prompt = random_decoder(config), random_ids(config, 4)
    cached, uncached = generate(model, prompt, 15), generate(model, prompt, 15, use_cache=False)
    assert uncached.new_ids == cached.new_ids
    assert [s.tokens_computed for s in uncached.steps] == list(range(4, 19))
    assert all(s.cache_bytes == 0 for s in uncached.steps) and uncached.cache_capacity_bytes == 0
    assert not uncached.use_cache and cached.use_cache


def test_greedy_is_the_default_sampling():
    assert GREEDY == Sampling() and GREEDY.greedy
