"""2025's attention layouts, each read from the config keys transformers uses for it and sized at a context
length: chunked local attention beside global layers (Llama 4), sliding layers with RoPE beside global
layers without positions (Command R7B), layers without RoPE that change no byte (SmolLM3), MLA (Kimi K2),
attention sinks (gpt-oss), and layers that keep no K/V but a fixed state per sequence (Jamba's Mamba
layers, Qwen3-Next's gated DeltaNet). Each expected number is written out from the published config
(tests/helpers/published_geometry_configs.py names each repository)."""

from __future__ import annotations

from tests.helpers import published_geometry_configs as pub
from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.fit import max_context
from txviz.analysis.kv.layer_figures import group_figures
from txviz.geometry import read_geometry

BF16 = 2
GIB = 1 << 30


def model_of(config: dict) -> memory_model.MemoryModel:
    return memory_model.MemoryModel.from_geometry(read_geometry(config), "test", "test")


def without(config: dict, *keys: str) -> dict:
    return {k: v for k, v in config.items() if k not in keys}


# ---- Llama 4: chunked attention on the RoPE layers, global attention without positions on every 4th ----
SCOUT_TEXT = pub.LLAMA_4_SCOUT["text_config"]
SCOUT_KV = 2 * 8 * 128 * BF16  # one layer, one token: K and V of 8 heads of 128


def test_llama4_chunks_its_rope_layers_and_leaves_every_fourth_global_without_positions():
    geometry = read_geometry(pub.LLAMA_4_SCOUT)
    assert geometry.layer_types == ("chunked_attention",) * 3 + ("full_attention",) + \
        (("chunked_attention",) * 3 + ("full_attention",)) * 11
    assert geometry.positionless == tuple(range(3, 48, 4))
    assert set(geometry.windows) == {8192, None}
    model = model_of(pub.LLAMA_4_SCOUT)
    assert memory.kv_cache_bytes_at(model, 4096) == 48 * 4096 * SCOUT_KV  # no chunk is full yet
    assert memory.kv_cache_bytes_at(model, 262144) == (36 * 8192 + 12 * 262144) * SCOUT_KV
    assert memory.token_kv_bytes_past_windows(model) == 12 * SCOUT_KV


def test_llama4_derives_its_layers_from_the_interval_and_a_null_chunk_makes_every_layer_global():
    bare = without(SCOUT_TEXT, "no_rope_layers", "moe_layers")  # Llama4TextConfig's defaults: interval 4, step 1
    assert read_geometry(bare).layer_types == read_geometry(pub.LLAMA_4_SCOUT).layer_types
    assert read_geometry({**bare, "no_rope_layer_interval": 2}).positionless == tuple(range(1, 48, 2))
    unchunked = read_geometry({**SCOUT_TEXT, "attention_chunk_size": None})
    assert set(unchunked.layer_types) == {"full_attention"} and set(unchunked.windows) == {None}
    assert unchunked.positionless == tuple(range(3, 48, 4))  # still no positions there


def test_llama4_interleaved_moe_layers_hold_a_dense_mlp_of_intermediate_size_mlp_between_them():
    every_other = read_geometry({**without(SCOUT_TEXT, "moe_layers"), "interleave_moe_layer_step": 2})
    scout = read_geometry(pub.LLAMA_4_SCOUT)
    moe_layer = 5120 * 16 + 16 * 3 * 5120 * 8192 + 3 * 5120 * 8192  # router, experts, shared expert
    assert scout.n_params - every_other.n_params == 24 * (moe_layer - 3 * 5120 * 16384)
    assert every_other.moe_layers == 24


# ---- Cohere 2 (Command R7B): 3 sliding layers with RoPE, then a global one without positions ----
def test_command_r7b_slides_three_of_four_layers_and_its_global_layers_have_no_positions():
    geometry = read_geometry(pub.COMMAND_R7B)
    assert geometry.windows == (4096, 4096, 4096, None) * 8
    assert geometry.positionless == tuple(range(3, 32, 4))
    model = model_of(pub.COMMAND_R7B)
    assert memory.kv_cache_bytes_at(model, 8192) == (24 * 4096 + 8 * 8192) * 2 * 8 * 128 * BF16
    pattern_only = without(pub.COMMAND_R7B, "sliding_window_pattern")  # Cohere2Config's default pattern: 4
    assert read_geometry(pattern_only).windows == geometry.windows


# ---- SmolLM3: layers without RoPE keep as much as the others ----
def test_smollm3_layers_without_rope_are_recognised_and_change_no_byte():
    geometry = read_geometry(pub.SMOLLM3_3B)
    assert geometry.positionless == tuple(range(3, 36, 4))
    all_rope = model_of({**pub.SMOLLM3_3B, "no_rope_layers": [1] * 36})
    assert memory.kv_cache_bytes_at(model_of(pub.SMOLLM3_3B), 65536) == \
        memory.kv_cache_bytes_at(all_rope, 65536) == 36 * 65536 * 2 * 4 * 128 * BF16
    assert read_geometry({**pub.SMOLLM3_3B, "no_rope_layers": [1] * 36}).positionless == ()


# ---- MLA: Kimi K2 caches a 512-wide latent and one 64-wide RoPE key per token and layer ----
def test_kimi_k2_caches_the_latent_and_the_rope_key():
    model = model_of(pub.KIMI_K2_INSTRUCT)
    assert model.kind == "MLA"
    assert memory.kv_cache_bytes_at(model, 131072) == 61 * 131072 * (512 + 64) * BF16
    assert memory.kv_cache_bytes_at(model, 131072, batch=4, kv_dtype="fp8") == 4 * 61 * 131072 * (512 + 64)


# ---- attention sinks: parameters, no KV ----
def test_gpt_oss_sinks_are_parameters_and_keep_no_kv():
    geometry = read_geometry(pub.GPT_OSS_120B)
    assert geometry.attention_sinks == 64
    small = dict(geometry.param_groups)["small"]  # norms, attention biases, sinks, router biases (not the experts')
    assert small == 36 * (2 * 2880 + 4096 + 2 * 512 + 2880 + 64 + 128) + 2880
    model = model_of(pub.GPT_OSS_120B)
    assert model.attention_sinks == 64
    assert memory.kv_cache_bytes_at(model, 131072) == (18 * 128 + 18 * 131072) * 2 * 8 * 64 * BF16


# ---- layers that keep no K/V: Jamba's Mamba layers, Qwen3-Next's gated DeltaNet ----
JAMBA_STATE = 28 * 8192 * (4 + 16)  # Mamba layers × (expand × hidden) channels × (conv kernel + SSM state)
JAMBA_KV = 4 * 2 * 8 * 128  # elements per token: 4 attention layers' K and V


def test_jamba_keeps_kv_on_its_attention_layers_and_a_fixed_state_on_its_mamba_layers():
    geometry = read_geometry(pub.JAMBA_1_5_MINI)
    assert [i for i, t in enumerate(geometry.layer_types) if t == "full_attention"] == [4, 12, 20, 28]
    assert geometry.positionless == (4, 12, 20, 28)  # Jamba's attention applies no positions
    model = model_of(pub.JAMBA_1_5_MINI)
    assert memory.token_kv_bytes(model) == JAMBA_KV * BF16
    assert memory.kv_cache_bytes_at(model, 0) == 0
    assert memory.kv_cache_bytes_at(model, 262144) == (262144 * JAMBA_KV + JAMBA_STATE) * BF16
    assert memory.kv_cache_bytes_at(model, 1000, batch=3, kv_dtype="fp32") == 3 * (1000 * JAMBA_KV + JAMBA_STATE) * 4
    # an fp8 cache keeps K and V in fp8, the recurrent state stays bf16
    assert memory.kv_cache_bytes_at(model, 1000, kv_dtype="fp8") == 1000 * JAMBA_KV + JAMBA_STATE * BF16


def test_jamba_reads_the_attention_period_and_offset():
    shifted = read_geometry({**pub.JAMBA_1_5_MINI, "attn_layer_period": 4, "attn_layer_offset": 1})
    assert [i for i, t in enumerate(shifted.layer_types) if t == "full_attention"] == list(range(1, 32, 4))
    model = model_of({**pub.JAMBA_1_5_MINI, "attn_layer_period": 4, "attn_layer_offset": 1})
    assert memory.kv_cache_bytes_at(model, 100) == (100 * 8 * 2 * 8 * 128 + 24 * 8192 * 20) * BF16


def test_the_longest_context_that_fits_counts_the_state_once_per_sequence():
    model = model_of(pub.JAMBA_1_5_MINI)
    fit = max_context(model, 200.0, batch=2)
    free = 200 * GIB - memory.weight_bytes(model)
    assert fit.max_tokens == (free - 2 * JAMBA_STATE * BF16) // (2 * JAMBA_KV * BF16)


QWEN3_NEXT_STATE = 36 * (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 4)  # recurrent matrices + conv windows
QWEN3_NEXT_KV = 12 * 2 * 2 * 256  # 12 gated-attention layers, 2 KV heads of 256


def test_qwen3_next_keeps_kv_on_every_fourth_layer_and_a_deltanet_state_on_the_others():
    geometry = read_geometry(pub.QWEN3_NEXT_80B)
    assert geometry.layer_types == ("linear_attention",) * 3 + ("full_attention",) + \
        (("linear_attention",) * 3 + ("full_attention",)) * 11
    model = model_of(pub.QWEN3_NEXT_80B)
    assert memory.kv_cache_bytes_at(model, 262144) == (262144 * QWEN3_NEXT_KV + QWEN3_NEXT_STATE) * BF16
    listed = {**without(pub.QWEN3_NEXT_80B, "full_attention_interval"),
              "layer_types": ["linear_attention", "full_attention"] * 24}
    assert memory.token_kv_bytes(model_of(listed)) == 24 * 2 * 2 * 256 * BF16  # an explicit list wins


def test_a_what_if_with_more_kv_heads_adds_projections_only_on_the_layers_that_keep_kv():
    model = model_of(pub.JAMBA_1_5_MINI)
    mha = memory_model.kind_variants(model)["MHA"]
    assert mha.n_params - model.n_params == 4 * 2 * 4096 * 128 * (32 - 8)


# ---- the per-layer-type figures the report and the pages show ----
def test_each_group_says_what_it_keeps():
    rows = {row["layer_type"]: row for row in group_figures(model_of(pub.COMMAND_R7B), 8192)}
    sliding, full = rows["sliding_attention"], rows["full_attention"]
    assert (sliding["layers"], sliding["window"], sliding["kv_bytes_per_token"]) == (24, 4096, 24 * 2 * 8 * 128 * BF16)
    assert sliding["bytes_at_tokens"] == 24 * 4096 * 2 * 8 * 128 * BF16 and not sliding["grows"]
    assert (full["layers"], full["without_positions"], full["grows"]) == (8, 8, True)
    assert full["summary"] == "8 global layers without positions grow by 32.0 KiB per token"
    assert sliding["summary"].startswith("24 sliding layers keep the last 4,096 tokens: 96.0 KiB per token")
    jamba = {row["layer_type"]: row for row in group_figures(model_of(pub.JAMBA_1_5_MINI), 10, batch=2)}
    assert jamba["mamba"]["state_bytes_per_sequence"] == JAMBA_STATE * BF16
    assert jamba["mamba"]["bytes_at_tokens"] == 2 * JAMBA_STATE * BF16
