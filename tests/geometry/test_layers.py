"""What differs from layer to layer or token to token: sliding windows (all layers, alternating,
5-of-6, Qwen2's max_window_layers), MoE experts held vs run (shared experts, dense first layers), the
MLA latent, tied embeddings and the FLOPs of a token; each expected number written out from the
published config (tests/helpers/published_*_configs.py)."""

from __future__ import annotations

import pytest

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from txviz.analysis.kv import memory, memory_model
from txviz.geometry import GeometryError, read_geometry

BF16 = 2


def model_of(config: dict) -> memory_model.MemoryModel:
    return memory_model.MemoryModel.from_geometry(read_geometry(config), "test", "test")


def test_mistral_keeps_4096_tokens_on_every_layer():
    geometry = read_geometry(hf.MISTRAL_7B_V01)
    assert geometry.windows == (4096,) * 32
    assert memory.kv_cache_bytes_at(model_of(hf.MISTRAL_7B_V01), 32768) == 32 * 4096 * 2 * 8 * 128 * BF16
    assert read_geometry(hf.MISTRAL_7B_V03).windows == (None,) * 32  # v0.3 dropped the window


def test_gemma2_alternates_local_and_global_layers():
    geometry = read_geometry(pub.GEMMA_2_9B)
    assert geometry.windows == (4096, None) * 21
    assert memory.kv_cache_bytes_at(model_of(pub.GEMMA_2_9B), 8192) == (21 * 8192 + 21 * 4096) * 2 * 8 * 256 * BF16


def test_gemma3_keeps_512_tokens_on_5_of_6_layers():
    geometry = read_geometry(pub.GEMMA_3_270M)
    assert geometry.windows == (512, 512, 512, 512, 512, None) * 3
    assert memory.kv_cache_bytes_at(model_of(pub.GEMMA_3_270M), 32768) == (3 * 32768 + 15 * 512) * 2 * 256 * BF16
    without_list = {k: v for k, v in pub.GEMMA_3_270M.items() if k != "layer_types"}
    assert read_geometry({**without_list, "sliding_window_pattern": 6}).windows == geometry.windows


def test_gemma3_multimodal_reads_its_text_config_and_says_the_vision_tower_is_left_out():
    geometry = read_geometry(pub.GEMMA_3_4B_IT)
    assert geometry.model_type == "gemma3_text" and geometry.tied_embeddings
    full = [i for i, w in enumerate(geometry.windows) if w is None]
    assert full == [5, 11, 17, 23, 29] and set(geometry.windows) == {1024, None}  # every 6th layer is global
    assert geometry.max_context == 131072 and geometry.vocab_size == 262208  # Gemma3TextConfig's defaults
    assert any("vision" in note for note in geometry.notes)


def test_qwen2_windows_only_the_layers_from_max_window_layers_when_switched_on():
    assert read_geometry(hf.QWEN2_7B).windows == (None,) * 28  # published: use_sliding_window false
    variant = {**hf.QWEN2_7B, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    assert read_geometry(variant).windows == (None,) * 20 + (4096,) * 8
    assert memory.kv_cache_bytes_at(model_of(variant), 32768) == (20 * 32768 + 8 * 4096) * 2 * 4 * 128 * BF16


def test_an_explicit_layer_types_list_wins_where_the_family_s_config_class_has_one():
    types = ["full_attention", "sliding_attention"] * 14
    qwen2 = {**hf.QWEN2_7B, "use_sliding_window": True, "sliding_window": 4096, "layer_types": types}
    assert read_geometry(qwen2).windows == (None, 4096) * 14
    gpt_oss = {k: v for k, v in pub.GPT_OSS_120B.items() if k != "layer_types"}  # GptOssConfig: sliding first
    assert read_geometry(gpt_oss).windows == read_geometry(pub.GPT_OSS_120B).windows == (128, None) * 18
    with pytest.raises(GeometryError, match="layer_types"):
        read_geometry({**qwen2, "layer_types": ["sliding_attention"]})


def test_a_family_whose_classes_read_no_layer_types_keeps_its_own_layers_and_says_so():
    # transformers' MistralConfig reads no layer_types (its warning points to Ministral): every layer slides
    geometry = read_geometry({**hf.MISTRAL_7B_V01, "layer_types": ["full_attention", "sliding_attention"] * 16})
    assert geometry.windows == (4096,) * 32
    assert geometry.ignored == ("`layer_types` ignored: the figure assumes the layers this family's transformers "
                                "classes build, which read no layer_types",)
    llama = read_geometry({**hf.LLAMA_3_8B, "sliding_window": 4096})  # nor does Llama keep a window
    assert llama.windows == (None,) * 32 and "`sliding_window` ignored" in llama.ignored[0]


def test_mixtral_holds_8_experts_and_runs_2():
    geometry = read_geometry(hf.MIXTRAL_8X7B)
    expert = 3 * 4096 * 14336
    assert (geometry.n_experts, geometry.experts_per_token, geometry.moe_layers) == (8, 2, 32)
    assert geometry.n_params - geometry.active_params == 32 * 6 * expert
    assert geometry.active_params == 12_879_925_248  # "12.9B active"


def test_qwen2_moe_counts_its_shared_expert_and_gate_as_active():
    geometry = read_geometry(pub.QWEN1_5_MOE_A2_7B)
    layer = (3 * 2048 * 2048 + 3 * 2048 + 2048 * 2048 + 2 * 2048  # q/k/v with biases, o, two RMSNorms
             + 2048 * 60 + 4 * 3 * 2048 * 1408 + 3 * 2048 * 5632 + 2048)  # router, 4 experts, shared + its gate
    assert geometry.active_params == 2 * 151936 * 2048 + 2048 + 24 * layer
    assert (geometry.n_experts, geometry.experts_per_token, geometry.shared_experts) == (60, 4, 1)


def test_qwen3_moe_active_parameters():
    geometry = read_geometry(pub.QWEN3_30B_A3B)
    layer = 2048 * 4096 + 2 * 2048 * 512 + 4096 * 2048 + 2 * 128 + 2 * 2048 + 2048 * 128 + 8 * 3 * 2048 * 768
    assert geometry.active_params == 2 * 151936 * 2048 + 2048 + 48 * layer


def test_deepseek_v3_caches_the_latent_and_runs_37b():
    geometry = read_geometry(pub.DEEPSEEK_V3)
    assert (geometry.latent_dim, geometry.rope_dim, geometry.kind) == (512, 64, "MLA")
    assert geometry.kv_elements_per_token() == 61 * (512 + 64)  # not 61 × 2 × 128 × 128
    assert geometry.moe_layers == 61 - 3 and geometry.shared_experts == 1
    assert geometry.active_params == 37_552_282_624  # txviz's preset, "37B activated"
    model = model_of(pub.DEEPSEEK_V3)
    assert memory.kv_cache_bytes_at(model, 163840) == 163840 * 61 * 576 * BF16


def test_deepseek_v2_lite_has_no_query_compression_and_one_dense_layer():
    geometry = read_geometry(pub.DEEPSEEK_V2_LITE)
    attention = (2048 * 16 * 192 + 2048 * (512 + 64) + 512 + 512 * 16 * (128 + 128) + 16 * 128 * 2048)
    dense = 2 * 2048 + attention + 3 * 2048 * 10944
    moe = 2 * 2048 + attention + 64 * 2048 + 3 * 2048 * 2 * 1408 + 64 * 3 * 2048 * 1408
    assert geometry.n_params == 2 * 102400 * 2048 + 2048 + dense + 26 * moe
    assert geometry.moe_layers == 26


def test_tied_embeddings_are_counted_once():
    tied, untied = read_geometry(hf.QWEN2_0_5B), read_geometry({**hf.QWEN2_0_5B, "tie_word_embeddings": False})
    assert tied.tied_embeddings and not untied.tied_embeddings
    assert untied.n_params - tied.n_params == 151936 * 896


def test_flops_per_token_are_two_per_multiplied_weight_plus_attention():
    model = model_of(hf.LLAMA_3_1_8B)  # untied: the input table is looked up, not multiplied; norms are not
    attention = 2 * 32 * (128 + 128) * 32 * 1000  # 2·H·(d_qk + d_v) per position, 32 layers, 1000 positions
    assert memory.token_flops(model, 1000) == 2 * (8_030_261_248 - 128256 * 4096 - 65 * 4096) + attention
    gemma = model_of(pub.GEMMA_3_270M)  # tied: the one table is the output head, multiplied
    windows = 2 * 4 * (256 + 256) * (3 * 4096 + 15 * 512)
    norms = 18 * (4 * 640 + 2 * 256) + 640
    assert memory.token_flops(gemma, 4096) == 2 * (268_098_176 - norms) + windows
    mla = model_of(pub.DEEPSEEK_V3)
    norms = 61 * (2 * 7168 + 1536 + 512) + 7168  # two per layer, the query and latent RMSNorms, the final
    assert memory.token_flops(mla, 0) == 2 * (37_552_282_624 - 129280 * 7168 - norms)
    assert memory.token_flops(mla, 10) - memory.token_flops(mla, 0) == 2 * 128 * (192 + 128) * 61 * 10


@pytest.mark.parametrize("config", [hf.SMOLLM2_135M, hf.LLAMA_3_8B, hf.MIXTRAL_8X7B, hf.QWEN2_7B, hf.GPT2_SMALL,
                                    hf.MISTRAL_7B_V01])
def test_flops_equal_the_moe_pages_count_for_models_txviz_runs(config):
    from txviz.model.counts import flops_per_token
    from txviz.loading.hf.config import read_hf_config

    for context in (0, 100, 5000):
        assert memory.token_flops(model_of(config), context) == flops_per_token(read_hf_config(config), context)


@pytest.mark.parametrize("config,key", [(pub.FALCON_40B, "num_kv_heads"), (hf.LLAMA_3_8B, "num_key_value_heads"),
                                        (hf.QWEN2_7B, "num_key_value_heads"), (hf.MIXTRAL_8X7B, "num_key_value_heads")])
def test_the_mha_gqa_mqa_what_if_is_the_config_with_that_many_kv_heads(config, key):
    """The what-if changes the K/V projections with the heads: its parameters, active parameters, weight
    bytes, FLOPs and activations are those of the same config.json read with that many KV heads (Qwen2's
    K/V biases included), not the original model's."""
    for kind, variant in memory_model.kind_variants(model_of(config)).items():
        rewritten = model_of({**config, key: variant.kv_heads})
        for field in ("n_params", "active_params", "unmultiplied_params", "param_groups"):
            assert getattr(variant, field) == getattr(rewritten, field), (kind, field)
        assert memory.token_flops(variant, 4096) == memory.token_flops(rewritten, 4096)
        assert memory.memory_bill(variant, 4096) == memory.memory_bill(rewritten, 4096)


def test_the_per_layer_cache_equals_the_calculators_for_every_windowed_family():
    for config in (pub.GEMMA_3_270M, pub.GEMMA_3_4B_IT, pub.GEMMA_2_9B, pub.STARCODER2_3B, pub.PHI_3_MINI_4K,
                   pub.DEEPSEEK_V3, hf.MISTRAL_7B_V01):
        geometry, model = read_geometry(config), model_of(config)
        for tokens in (1, 511, 513, 5000, 40000):
            assert memory.kv_cache_bytes_at(model, tokens, 1, "fp32") == 4 * geometry.kv_elements_for(tokens)


def test_the_generic_rule_reads_experts_and_says_so():
    config = {**hf.MIXTRAL_8X7B, "model_type": "acme_moe"}
    geometry = read_geometry(config)
    assert (geometry.n_experts, geometry.experts_per_token) == (8, 2)
    assert geometry.n_params == read_geometry(hf.MIXTRAL_8X7B).n_params  # Mixtral's own numbers, untied
    assert any("num_local_experts experts on every layer" in a for a in geometry.assumptions)
