"""Gemma, Gemma 2 and Gemma 3 (text) from Hugging Face directories, against transformers itself.

Tiny random checkpoints are saved with ``save_pretrained`` and loaded through txviz; logits and every
layer's attention maps must equal transformers' eager path, on a prompt longer than the sliding window
so the band matters. The variants switch on what each family adds: GeGLU, √d embeddings, the (1 + w)
norm (gemma); post-norms, alternating windows, query_pre_attn_scalar and both soft-caps (gemma2);
QK-norm, a mixed layer pattern with a different local RoPE base, and RoPE scaling on global layers
only (gemma3_text). Then both config spellings, and the refusals.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.testing import assert_close

from tests.helpers.hf_reference import NEEDS_TRANSFORMERS
from tests.helpers import tiny_hf
from tests.helpers.tiny_hf import GEMMA_BASE, GEMMA_MIXED, WINDOW, edit_config, save, variants_of
from txviz.capture.trace import trace
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.loader import load_hf_dir, read_hf_config

pytestmark = NEEDS_TRANSFORMERS

SEQ_LEN = 24  # the prompt is three windows long
VARIANTS = variants_of("gemma", "gemma2", "gemma3")
MIXED = GEMMA_MIXED


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def build(variant: str, seed: int = 0) -> torch.nn.Module:
    return tiny_hf.build(variant, seed, scale=0.3)  # norm weights ≈ 1: Gemma's (1 + w) ≈ 2


def random_ids(seed: int = 0) -> torch.Tensor:
    return torch.randint(0, GEMMA_BASE["vocab_size"], (2, SEQ_LEN), generator=torch.Generator().manual_seed(seed))


def reference(hf_model, ids):
    with torch.no_grad():
        out = hf_model(ids, output_attentions=True)
    return out.logits, torch.stack(out.attentions)  # (B, T, V), (L, B, H, T, S)


@pytest.fixture(scope="module", params=VARIANTS)
def pair(request, tmp_path_factory):
    hf_model = build(request.param)
    loaded = load_hf_dir(save(hf_model, tmp_path_factory.mktemp(request.param)), device="cpu")
    return request.param, hf_model, loaded


def test_logits_and_every_attention_map_equal_transformers_eager(pair):
    variant, hf_model, loaded = pair
    ids = random_ids()
    expected_logits, expected_maps = reference(hf_model, ids)
    tr = trace(loaded.model, ids, capture=["logits", "attn_probs"])
    assert tr["attn_probs"].shape == expected_maps.shape
    assert_close(tr["attn_probs"], expected_maps, atol=1e-6, rtol=0)
    assert_close(tr["logits"], expected_logits, atol=1e-5, rtol=0)


def test_the_plain_call_agrees_too(pair):
    """Without capture the fused kernel runs (the blockwise path where scores are soft-capped)."""
    _, hf_model, loaded = pair
    ids = random_ids(seed=1)
    with torch.no_grad():
        assert_close(loaded.model(ids), reference(hf_model, ids)[0], atol=1e-4, rtol=1e-4)


def test_the_band_is_in_force_on_sliding_layers_only(pair):
    variant, hf_model, loaded = pair
    maps = trace(loaded.model, random_ids(), capture=["attn_probs"])["attn_probs"]  # (L, B, H, T, S)
    distance = torch.arange(SEQ_LEN)[:, None] - torch.arange(SEQ_LEN)[None, :]
    too_far = distance >= WINDOW
    for layer, kind in enumerate(getattr(hf_model.config, "layer_types", None) or ["full_attention"] * 4):
        beyond_the_window = maps[layer][..., too_far]
        if kind == "sliding_attention":
            assert loaded.config.layer_window(layer) == WINDOW
            assert beyond_the_window.abs().max() == 0
        else:
            assert loaded.config.layer_window(layer) is None
            assert beyond_the_window.sum() > 0.01  # the full layers see the whole past


def test_the_config_says_what_transformers_built(pair):
    variant, hf_model, loaded = pair
    hf, config = hf_model.config, loaded.config
    assert config.ffn == "geglu" and config.gelu_approximate == "tanh"
    assert config.embed_scale == hf.hidden_size ** 0.5
    assert config.sandwich_norm == (hf.model_type != "gemma")
    assert config.qk_norm == (hf.model_type == "gemma3_text")
    assert config.query_scale == (hf.query_pre_attn_scalar ** -0.5 if hf.model_type != "gemma" else None)
    assert config.final_softcap == getattr(hf, "final_logit_softcapping", None)
    assert config.attn_softcap == (hf.attn_logit_softcapping if hf.model_type == "gemma2" else None)
    if hf.model_type == "gemma3_text":
        assert config.rope_local_theta == hf.rope_parameters["sliding_attention"]["rope_theta"]
        assert config.rope_theta == hf.rope_parameters["full_attention"]["rope_theta"]


def test_the_gemma_norm_is_folded_into_the_weights(pair):
    """transformers multiplies by (1 + w); txviz stores 1 + w and multiplies by it."""
    _, hf_model, loaded = pair
    hf_final = hf_model.model.norm.weight
    assert torch.equal(loaded.model.final_norm.weight, hf_final.float() + 1.0)


def test_scaled_rope_reaches_global_layers_only(tmp_path):
    loaded = load_hf_dir(save(build("gemma3_scaled_global_rope"), tmp_path), device="cpu")
    model = loaded.model
    global_rope, local_rope = (model.kind_positions[model.kind_of[i]] for i in (2, 0))
    assert loaded.config.rope_scaling.kind == "linear"
    assert_close(global_rope.inv_freq, 1.0 / (5000.0 ** (torch.arange(0, 16, 2).float() / 16)) / 4.0)
    assert_close(local_rope.inv_freq, 1.0 / (100.0 ** (torch.arange(0, 16, 2).float() / 16)))


# ---- config spellings ---------------------------------------------------------------------------
def _transformers_4_spelling(config: dict) -> dict:
    """rope_theta, rope_local_base_freq, rope_scaling and sliding_window_pattern, no layer_types."""
    params = config.pop("rope_parameters")
    config.pop("layer_types")
    full = dict(params["full_attention"])
    config["rope_theta"] = full.pop("rope_theta")
    config["rope_local_base_freq"] = params["sliding_attention"]["rope_theta"]
    config["rope_scaling"] = None if full.get("rope_type") == "default" else full
    config["sliding_window_pattern"] = 3  # layers 2 and 5 global
    return config


def test_gemma3_transformers_4_spelling_reads_as_transformers_reads_it(tmp_path):
    save(build("gemma3_scaled_global_rope"), tmp_path)
    edit_config(tmp_path, _transformers_4_spelling)
    raw = json.loads((tmp_path / "config.json").read_text())
    from transformers import Gemma3TextConfig

    expected = Gemma3TextConfig(**raw)
    config = read_hf_config(tmp_path)
    assert config.layer_types == tuple(t.split("_")[0] for t in expected.layer_types)
    assert config.layer_types == ("sliding", "sliding", "full", "sliding")
    assert config.rope_theta == expected.rope_parameters["full_attention"]["rope_theta"] == 5000.0
    assert config.rope_local_theta == expected.rope_parameters["sliding_attention"]["rope_theta"] == 100.0
    assert config.rope_scaling.kind == "linear" and config.rope_scaling.factor == 4.0


def test_gemma2_without_layer_types_alternates_from_sliding(tmp_path):
    save(build("gemma2_softcaps"), tmp_path)
    edit_config(tmp_path, lambda c: {k: v for k, v in c.items() if k != "layer_types"})
    assert read_hf_config(tmp_path).layer_types == ("sliding", "full", "sliding", "full")


@pytest.mark.parametrize("edit, message", [
    (lambda c: {**c, "use_bidirectional_attention": True}, "bidirectional"),
    (lambda c: {**c, "layer_types": ["sliding_attention", "chunked_attention", "full_attention", "full_attention"]},
     "layer_types"),
    (lambda c: {**c, "layer_types": MIXED[:3]}, "layer_types has 3 entries"),
    (lambda c: {**c, "sliding_window": None}, "sliding_window is None"),
    (lambda c: {**c, "rope_parameters": {**c["rope_parameters"], "sliding_attention": {
        "rope_type": "linear", "factor": 2.0, "rope_theta": 100.0}}}, "sliding layers"),
])
def test_gemma3_configs_txviz_cannot_build_are_refused(edit, message, tmp_path):
    save(build("gemma3_mixed_rope"), tmp_path)
    edit_config(tmp_path, edit)
    with pytest.raises(ModelLoadError, match=message):
        load_hf_dir(tmp_path, device="cpu")


# ---- published configs (config only, no weights) -----------------------------------------------
@pytest.mark.parametrize("name", ["GEMMA_2B", "GEMMA_2_9B", "GEMMA_3_270M"])
def test_published_configs_read_as_transformers_and_the_geometry_reader_read_them(name):
    from transformers import AutoConfig

    from tests.helpers import published_geometry_configs as published
    from txviz.model.counts import count_params
    from txviz.geometry import read_geometry

    raw = getattr(published, name)
    config = read_hf_config(raw)
    hf = AutoConfig.for_model(**raw)
    kinds = getattr(hf, "layer_types", None) or ["full_attention"] * hf.num_hidden_layers
    assert config.layer_types in (None, tuple(LAYER_KIND[k] for k in kinds))
    assert config.layer_windows == tuple(hf.sliding_window if k == "sliding_attention" else None for k in kinds)
    assert config.head_dim == hf.head_dim and config.n_kv_heads == hf.num_key_value_heads
    assert config.embed_scale == hf.hidden_size ** 0.5 and config.gelu_approximate == "tanh"
    assert config.query_scale == (hf.query_pre_attn_scalar ** -0.5 if hf.model_type != "gemma" else None)
    rope = hf.rope_parameters
    if hf.model_type == "gemma3_text":
        assert (config.rope_theta, config.rope_local_theta) == (rope["full_attention"]["rope_theta"],
                                                                rope["sliding_attention"]["rope_theta"])
    else:
        assert config.rope_theta == rope["rope_theta"] and config.rope_local_theta is None
    geometry = read_geometry(raw)  # an independent reader (txviz.geometry): same windows, same parameters
    assert geometry.windows == config.layer_windows
    assert geometry.n_params == count_params(config)


LAYER_KIND = {"sliding_attention": "sliding", "full_attention": "full"}
