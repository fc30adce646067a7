"""Qwen3, OLMo 2, SmolLM3 and Phi-1/2 checkpoints against transformers itself: tiny random models built
offline (``AutoConfig.for_model``), saved with ``save_pretrained`` (safetensors) and loaded through txviz
must give transformers' eager logits, every layer's attention map and every layer's residual stream, on
a prompt three sliding windows long. The variants (tests/helpers/tiny_hf_dense.py) switch on what each
family adds: per-head QK-norm and a window on some layers (Qwen3), post-norms only and QK-norm across
all heads (OLMo 2), layers without RoPE (SmolLM3), the one-norm parallel block with partial rotary,
QK LayerNorm and biases on the unembedding (Phi). Then the KV cache, the parameter counts, the configs'
fields and the refusals, and the transformers 4.x spelling the published config.json files use."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers.tiny_hf import SEQ_LEN, WINDOW, edit_config, random_ids, save
from tests.helpers.tiny_hf_dense import DENSE_VARIANTS, build_dense, dense_config
from txviz import KVCache
from txviz.capture.trace import trace
from txviz.geometry import read_config
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.loader import load_hf_dir, read_hf_config
from txviz.model.counts import count_params

pytestmark = NEEDS_TRANSFORMERS


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=sorted(DENSE_VARIANTS))
def pair(request, tmp_path_factory):
    hf_model = build_dense(request.param)
    loaded = load_hf_dir(save(hf_model, tmp_path_factory.mktemp(request.param)), device="cpu")
    return request.param, hf_model, loaded


def reference(hf_model, ids: torch.Tensor):
    """transformers' logits (B, T, V), attention maps (L, B, H, T, S) and the residual stream entering
    each layer (L, B, T, d) (its last hidden state is after the final norm, so it is left out)."""
    with torch.no_grad():
        out = hf_model(ids, output_attentions=True, output_hidden_states=True, use_cache=False)
    return out.logits, torch.stack(out.attentions), torch.stack(out.hidden_states[:-1])


# ---- parity -------------------------------------------------------------------------------------
def test_logits_every_attention_map_and_residual_equal_transformers_eager(pair):
    variant, hf_model, loaded = pair
    assert loaded.metadata["architecture"] == hf_model.config.architectures[0]
    ids = random_ids(hf_model.config.vocab_size)
    expected_logits, expected_maps, expected_resid = reference(hf_model, ids)
    tr = trace(loaded.model, ids, capture=["logits", "attn_probs", "resid"])
    assert tr["attn_probs"].shape == expected_maps.shape
    assert_close(tr["attn_probs"], expected_maps, atol=1e-6, rtol=0)
    assert_close(tr["resid"][:-1], expected_resid, atol=1e-5, rtol=1e-5)
    assert_close(tr["logits"], expected_logits, atol=1e-5, rtol=0)


def test_the_plain_call_agrees_too(pair):
    """Without capture the fused kernel runs."""
    _, hf_model, loaded = pair
    ids = random_ids(hf_model.config.vocab_size, seed=1)
    with torch.no_grad():
        assert_close(loaded.model(ids), reference(hf_model, ids)[0], atol=1e-4, rtol=1e-4)


def test_cached_decode_equals_the_full_forward(pair):
    """Prefill, then chunks and single tokens through the KV cache (sliding and NoPE layers among them)."""
    _, hf_model, loaded = pair
    ids = random_ids(hf_model.config.vocab_size)
    cache = KVCache(loaded.config, SEQ_LEN, batch=ids.shape[0])
    with torch.inference_mode():
        full = loaded.model(ids)
        steps = [loaded.model(ids[:, start:stop], cache=cache)
                 for start, stop in ((0, 5), (5, 14), *((t, t + 1) for t in range(14, SEQ_LEN)))]
    assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_the_band_is_in_force_on_sliding_layers_only(pair):
    variant, hf_model, loaded = pair
    maps = trace(loaded.model, random_ids(hf_model.config.vocab_size), capture=["attn_probs"])["attn_probs"]
    distance = torch.arange(SEQ_LEN)[:, None] - torch.arange(SEQ_LEN)[None, :]
    kinds = getattr(hf_model.config, "layer_types", None) or ["full_attention"] * hf_model.config.num_hidden_layers
    for layer, kind in enumerate(kinds):
        beyond = maps[layer][..., distance >= WINDOW]
        assert loaded.config.layer_window(layer) == (WINDOW if kind == "sliding_attention" else None)
        assert (beyond.abs().max() == 0) if kind == "sliding_attention" else (beyond.sum() > 0.01)


@pytest.mark.parametrize("variant", [v for v in sorted(DENSE_VARIANTS) if v.startswith("smollm3")])
def test_nope_layers_leave_q_and_k_unrotated_and_rope_layers_rotate_them(variant, tmp_path):
    hf_model = build_dense(variant)
    loaded = load_hf_dir(save(hf_model, tmp_path), device="cpu")
    tr = trace(loaded.model, random_ids(hf_model.config.vocab_size), capture=["q", "q_rot", "k", "k_rot"])
    uses_rope = [bool(flag) for flag in hf_model.config.no_rope_layers]  # transformers: 1 where RoPE is used
    assert False in uses_rope and True in uses_rope  # the premise: a mix
    for layer, rope in enumerate(uses_rope):
        assert loaded.config.layer_uses_rope(layer) == rope
        for name in ("q", "k"):
            same = torch.equal(tr[f"{name}_rot"][layer], tr[name][layer])
            assert same != rope, (layer, name)


# ---- what it costs: parameters --------------------------------------------------------------------
def test_parameter_counts_equal_transformers(pair, tmp_path):
    """count_params (the app's sizes), the geometry reader behind ``txviz memory`` and the model built all
    agree with transformers' own num_parameters()."""
    variant, hf_model, loaded = pair
    expected = hf_model.num_parameters()
    assert count_params(loaded.config) == expected
    assert sum(p.numel() for p in loaded.model.parameters()) == expected
    hf_model.config.save_pretrained(tmp_path)
    assert read_config(tmp_path).n_params == expected


# Published sizes (the dimensions of their config.json files): transformers builds each on the meta
# device, so its count is exact without the memory.
PUBLISHED = {
    "Qwen3-0.6B": ("qwen3", dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                                 num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                 tie_word_embeddings=True, max_position_embeddings=40960)),
    "OLMo-2-1B": ("olmo2", dict(vocab_size=100352, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=4096)),
    "SmolLM3-3B": ("smollm3", dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008,
                                   num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=4,
                                   max_position_embeddings=65536)),
    "phi-2": ("phi", dict(vocab_size=51200, hidden_size=2560, intermediate_size=10240, num_hidden_layers=32,
                          num_attention_heads=32, partial_rotary_factor=0.4)),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_at_published_sizes_equal_transformers(name, tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, dims = PUBLISHED[name]
    config = AutoConfig.for_model(model_type, **dims)
    with torch.device("meta"):
        expected = AutoModelForCausalLM.from_config(config).num_parameters()
    config.save_pretrained(tmp_path)
    assert count_params(read_hf_config(tmp_path)) == expected
    assert read_config(tmp_path).n_params == expected


# ---- the configs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant, fields", [
    ("qwen3", dict(qk_norm=True, qk_norm_scope="head", head_dim=16, sliding_window=None, layer_types=None)),
    ("qwen3_window_on_layer_1", dict(sliding_window=WINDOW, layer_types=("full", "sliding"))),
    ("qwen3_biases_tied_head_dim_8", dict(qkv_bias=True, out_bias=True, tie_embeddings=True, head_dim=8)),
    ("olmo2", dict(pre_norm=False, sandwich_norm=True, qk_norm=True, qk_norm_scope="all_heads")),
    ("smollm3_every_4th_nope", dict(layer_rope=(True, True, True, False), layer_types=None, tie_embeddings=True)),
    ("smollm3_windowed_nope", dict(layer_rope=(True, False, True, False), sliding_window=WINDOW,
                                   layer_types=("full", "sliding", "full", "sliding"))),
    ("phi_half_rotary", dict(rotary_dims=8, parallel_block=True, shared_block_norm=True, lm_head_bias=True,
                             qk_norm=False, norm="layernorm", gelu_approximate="tanh")),
    ("phi_qk_layernorm_phi2_rotary", dict(rotary_dims=6, qk_norm=True, qk_norm_scope="head")),
    ("phi_gqa_full_rotary_gelu", dict(rotary_dims=None, n_kv_heads=2, gelu_approximate="none")),
])
def test_configs_read_the_family_options(variant, fields, tmp_path):
    dense_config(variant).save_pretrained(tmp_path)
    config = read_hf_config(tmp_path)
    assert {name: getattr(config, name) for name in fields} == fields


def test_smollm3_without_a_list_skips_rope_every_interval(tmp_path):
    dense_config("smollm3_every_4th_nope").save_pretrained(tmp_path)
    edit_config(tmp_path, lambda c: {**{k: v for k, v in c.items() if k != "no_rope_layers"},
                                     "no_rope_layer_interval": 2})
    assert read_hf_config(tmp_path).layer_rope == (True, False, True, False)


def test_phi_without_a_rotary_factor_rotates_half_of_each_head(tmp_path):
    dense_config("phi_half_rotary").save_pretrained(tmp_path)
    edit_config(tmp_path, lambda c: {**c, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}})
    assert read_hf_config(tmp_path).rotary_dims == 8  # PhiConfig's default factor, 0.5 of 16


@pytest.mark.parametrize("variant, edit, message", [
    ("phi_half_rotary", lambda c: {**c, "tie_word_embeddings": True}, "tied embeddings"),
    ("phi_half_rotary", lambda c: {**c, "hidden_act": "relu"}, "hidden_act"),
    ("smollm3_every_4th_nope", lambda c: {**c, "no_rope_layers": [1, 0]}, "no_rope_layers"),
    ("qwen3", lambda c: {**c, "layer_types": ["full_attention", "sliding_attention"]}, "sliding window is off"),
    ("qwen3", lambda c: {**c, "layer_types": ["full_attention"]}, "layer_types has 1 entries"),
])
def test_unsupported_or_inconsistent_configs_are_refused_by_name(variant, edit, message, tmp_path):
    dense_config(variant).save_pretrained(tmp_path)
    edit_config(tmp_path, edit)
    with pytest.raises(ModelLoadError, match=message):
        read_hf_config(tmp_path)


def _transformers_4_spelling(config: dict) -> dict:
    """As the published config.json files of these families are written (transformers 4.x): rope_theta and
    partial_rotary_factor at the top level, rope_scaling null, no layer_types (the families' rules give them)."""
    params = dict(config.pop("rope_parameters"))
    config.pop("layer_types", None)
    config["rope_theta"] = params.pop("rope_theta")
    if "partial_rotary_factor" in params:
        config["partial_rotary_factor"] = params.pop("partial_rotary_factor")
    assert params.pop("rope_type") == "default" and not params
    return {**config, "rope_scaling": None}


def test_the_transformers_4_spelling_loads_the_same_model(pair, tmp_path):
    variant, hf_model, loaded = pair
    save(hf_model, tmp_path)
    edit_config(tmp_path, _transformers_4_spelling)
    legacy = load_hf_dir(tmp_path, device="cpu")
    assert legacy.config.replace(name="", source="") == loaded.config.replace(name="", source="")
    ids = random_ids(hf_model.config.vocab_size)
    with torch.no_grad():
        assert_close(legacy.model(ids), reference(hf_model, ids)[0], atol=1e-4, rtol=1e-4)
