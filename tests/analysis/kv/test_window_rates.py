"""A windowed model adds fewer KV bytes per token once its windows are full: only the layers without a
window keep growing (Gemma 3 27B: 62 layers, 52 of them keep the last 1,024 tokens)."""

from __future__ import annotations

import json

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from txviz.analysis.kv import memory, memory_model


def model_of(config: dict) -> memory_model.MemoryModel:
    return memory_model.MemoryModel.from_config_json(json.dumps(config).encode())


def test_gemma_3_27b_adds_496_kib_per_token_then_80_kib_past_1024():
    model = model_of(pub.GEMMA_3_27B_IT)
    assert memory.token_kv_bytes(model) == 62 * 2 * 16 * 128 * 2 == 496 * 1024
    assert memory.token_kv_bytes_past_windows(model) == 10 * 2 * 16 * 128 * 2 == 80 * 1024
    grown = memory.kv_cache_bytes_at(model, 5000) - memory.kv_cache_bytes_at(model, 4000)  # both past the windows
    assert grown == 1000 * memory.token_kv_bytes_past_windows(model)


def test_without_windows_the_rate_never_changes_and_with_windows_everywhere_it_stops():
    llama = model_of(hf.LLAMA_3_8B)
    assert memory.token_kv_bytes_past_windows(llama) == memory.token_kv_bytes(llama)
    assert memory.token_kv_bytes_past_windows(model_of(hf.MISTRAL_7B_V01)) == 0
