"""The calculator's presets (txviz.analysis.kv.presets, plain data) equal txviz.geometry's reading of the
published config.json of the same model, wherever tests/helpers holds that config."""

from __future__ import annotations

import pytest

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from txviz.analysis.kv import memory, memory_model
from txviz.geometry import read_geometry

CONFIG_OF_PRESET = {
    "gpt2": hf.GPT2_SMALL, "smollm2-135m": hf.SMOLLM2_135M, "llama-2-7b": hf.LLAMA_2_7B, "llama-3-8b": hf.LLAMA_3_8B,
    "mistral-7b-v0.1": hf.MISTRAL_7B_V01, "mixtral-8x7b": hf.MIXTRAL_8X7B, "qwen2.5-7b": hf.QWEN2_7B,
    "gemma-2-9b": pub.GEMMA_2_9B, "falcon-7b": pub.FALCON_7B, "deepseek-v3": pub.DEEPSEEK_V3_FP8,
    "gemma-3-270m": pub.GEMMA_3_270M, "qwen3-30b-a3b": pub.QWEN3_30B_A3B, "llama-4-scout": pub.LLAMA_4_SCOUT,
    "jamba-1.5-mini": pub.JAMBA_1_5_MINI, "qwen3-next-80b-a3b": pub.QWEN3_NEXT_80B,
}
FIELDS = ("n_layers", "n_heads", "kv_heads", "head_dim", "n_params", "latent_dim", "rope_dim", "sliding_window",
          "window_layers", "max_context", "d_model", "ffn_width", "vocab_size", "unmultiplied_params", "qk_head_dim",
          "n_experts", "experts_per_token", "kind", "kv_bias", "layer_groups")


@pytest.mark.parametrize("key", sorted(CONFIG_OF_PRESET))
def test_preset_equals_its_config_read_by_geometry(key):
    published = memory_model.preset(key)
    read = memory_model.MemoryModel.from_geometry(read_geometry(CONFIG_OF_PRESET[key]), key, "test")
    assert {f: getattr(published, f) for f in FIELDS} == {f: getattr(read, f) for f in FIELDS}
    assert (published.active_params or published.n_params) == read.active_params
    assert memory.token_flops(published, 4096) == memory.token_flops(read, 4096)
    assert memory.weight_dtypes(published) == memory.weight_dtypes(read)  # a quantized checkpoint is offered as such
    if read.weight_format is not None:
        assert published.param_groups == read.param_groups and published.weight_format == read.weight_format
