"""Random edits of published configs of every family: the geometry reader returns a Geometry or
refuses with a ValueError that says why (never another exception), and every calculator function then
runs on what it read, as the KV page's upload does."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import published_geometry_configs, published_hf_configs
from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.fit import max_context

PUBLISHED = {name: config for module in (published_geometry_configs, published_hf_configs)
             for name, config in vars(module).items() if name.isupper() and isinstance(config, dict)}

VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10, 2**40) | st.floats() | st.text(max_size=8),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                   max_size=3), max_leaves=6)
KEYS = ["hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers", "intermediate_size",
        "vocab_size", "max_position_embeddings", "head_dim", "sliding_window", "layer_types", "n_embd", "n_head",
        "n_layer", "num_local_experts", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
        "kv_lora_rank", "qk_rope_head_dim", "q_lora_rank", "first_k_dense_replace", "model_type", "architectures",
        "tie_word_embeddings", "text_config", "attn_config", "multi_query", "new_decoder_architecture",
        "expansion_ratio", "use_sliding_window", "max_window_layers", "mlp_only_layers", "d_model", "n_heads",
        "attention_chunk_size", "no_rope_layers", "no_rope_layer_interval", "moe_layers", "interleave_moe_layer_step",
        "sliding_window_pattern", "attn_layer_period", "attn_layer_offset", "expert_layer_period", "mamba_d_state",
        "mamba_dt_rank", "mamba_expand", "linear_num_value_heads", "linear_conv_kernel_dim", "full_attention_interval"]


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(published=st.sampled_from(sorted(PUBLISHED)), changes=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3))
def test_any_edited_config_is_read_or_refused_and_the_calculator_runs(published, changes):
    edited = {**PUBLISHED[published], **changes}
    try:
        data = json.dumps(edited, allow_nan=True).encode()
    except (TypeError, ValueError):
        return
    try:
        model = memory_model.MemoryModel.from_config_json(data, "config.json")
    except ValueError as error:  # GeometryError, ModelLoadError: a message for people
        assert str(error)
        return
    lengths = memory.context_lengths(min(int(model.max_context or 131072), 1 << 20))
    try:
        variants = memory_model.kind_variants(model)
    except ValueError:
        variants = {model.kind: model}
    for selected in variants.values():
        memory.token_kv_bytes(selected, "bf16")
        memory.token_flops(selected, lengths[-1])
        max_context(selected, 80.0, batch=2)
        memory.weight_bytes(selected, "int4")
        memory.memory_bill(selected, lengths[-1], prefill_chunk=2048)
