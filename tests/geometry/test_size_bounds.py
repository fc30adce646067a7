"""Counts beyond any real model are refused before any per-layer work, with a one-line reason naming the
field, by the library, by the KV page's upload reader and by ``txviz memory --config``; and no published
config comes near a bound."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from txviz import cli
from txviz.analysis.kv.memory_model import MemoryModel
from txviz.config import SIZE_BOUNDS
from txviz.geometry import GeometryError, read_geometry
from txviz.geometry.fields import BOUNDED_AS, Fields, largest

# (config, field, the ModelConfig bound it plays): one just past the bound is refused.
PAST = [(hf.LLAMA_3_8B, "num_hidden_layers", "n_layers"), (hf.LLAMA_3_8B, "hidden_size", "d_model"),
        (hf.LLAMA_3_8B, "num_attention_heads", "n_heads"), (hf.LLAMA_3_8B, "num_key_value_heads", "n_kv_heads"),
        (hf.LLAMA_3_8B, "intermediate_size", "ffn_hidden"), (hf.LLAMA_3_8B, "vocab_size", "vocab_size"),
        (hf.LLAMA_3_8B, "max_position_embeddings", "max_seq_len"), (hf.LLAMA_3_8B, "head_dim", "head_dim"),
        (hf.MISTRAL_7B_V01, "sliding_window", "max_seq_len"), (hf.MIXTRAL_8X7B, "num_local_experts", "n_experts"),
        (hf.MIXTRAL_8X7B, "num_experts_per_tok", "top_k"), (pub.DEEPSEEK_V3, "n_routed_experts", "n_experts"),
        (pub.DEEPSEEK_V3, "kv_lora_rank", "d_model"), (pub.QWEN3_30B_A3B, "moe_intermediate_size", "ffn_hidden"),
        (pub.GPT_J_6B, "n_layer", "n_layers"), (pub.JAMBA_1_5_MINI, "attn_layer_period", "n_layers"),
        (pub.LLAMA_4_SCOUT["text_config"], "attention_chunk_size", "max_seq_len"),
        (pub.QWEN3_NEXT_80B, "linear_num_value_heads", "n_heads")]


@pytest.mark.parametrize("config,field,bound", PAST, ids=[f"{c.get('model_type')}-{f}" for c, f, _ in PAST])
def test_a_count_past_any_real_model_is_refused_naming_it(config, field, bound):
    past = SIZE_BOUNDS[bound] + 1
    with pytest.raises(GeometryError) as refused:
        read_geometry({**config, field: past})
    message = str(refused.value)
    assert f"{field} = {past:,} is beyond any real model (at most {SIZE_BOUNDS[bound]:,})" in message
    assert "\n" not in message and len(message) < 120


def test_a_billion_layers_is_refused_at_once_by_the_upload_reader_and_the_cli(capsys, tmp_path):
    """A config.json with ``num_hidden_layers: 1e9`` kept the KV page's upload (and the CLI) busy building
    per-layer tuples until memory ran out."""
    hostile = json.dumps({**hf.LLAMA_3_8B, "num_hidden_layers": 1e9})
    started = time.perf_counter()
    with pytest.raises(ValueError, match="num_hidden_layers = 1,000,000,000 is beyond any real model"):
        MemoryModel.from_config_json(hostile.encode())
    (tmp_path / "config.json").write_text(hostile)
    assert cli.main(["memory", "--config", str(tmp_path / "config.json"), "--json"]) == 2
    assert "is beyond any real model" in json.loads(capsys.readouterr().out)["error"]
    assert time.perf_counter() - started < 5  # before any per-layer work: a million layers took 2.5 s


def test_the_bounds_leave_every_published_config_readable():
    configs = [v for m in (hf, pub) for k, v in vars(m).items() if k.isupper() and isinstance(v, dict)]
    assert len(configs) > 20
    for config in configs:
        fields = Fields({**config, **(config.get("text_config") or {})}, "any")
        for name in BOUNDED_AS:
            value = fields.raw.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert value <= largest(name) / 4, (config.get("model_type"), name, value)  # far from the bound
