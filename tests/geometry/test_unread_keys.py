"""Every config key that could change the KV cache or the parameter count and that no reader understood is
named beside the figures ("`xyz` ignored: the figure assumes …"), in the library, the report and
``txviz memory``; keys that cannot change a byte (dropout, epsilons, RoPE settings, token ids) are not."""

from __future__ import annotations

import json

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from txviz import cli
from txviz.analysis.kv import memory_model
from txviz.geometry import read_geometry


def ignored_keys(config: dict) -> list[str]:
    return [warning.split("`")[1] for warning in read_geometry(config).ignored]


def test_an_unknown_key_in_a_known_family_is_named_and_the_figure_says_what_it_assumed():
    config = {**hf.LLAMA_3_8B, "num_memory_tokens": 64}
    (warning,) = read_geometry(config).ignored
    assert warning == ("`num_memory_tokens` ignored: the figure assumes it changes neither the KV cache nor the "
                       "parameter count")
    assert read_geometry(hf.LLAMA_3_8B).ignored == ()


def test_keys_that_cannot_change_a_byte_are_not_named():
    harmless = {**hf.LLAMA_3_8B, "attention_dropout": 0.1, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
                "pad_token_id": 0, "router_aux_loss_coef": 0.01, "torch_dtype": "float16", "_commit_hash": "abc"}
    assert read_geometry(harmless).ignored == ()


def test_a_hybrid_family_the_readers_do_not_know_names_each_state_space_key():
    # a Falcon-H1-like config: its Mamba heads and state are read by no reader, so each is named
    config = {**hf.LLAMA_3_8B, "model_type": "falcon_h1", "architectures": ["FalconH1ForCausalLM"],
              "mamba_d_ssm": 1024, "mamba_n_heads": 128, "mamba_d_state": 256, "mamba_d_conv": 4,
              "mamba_expand": 2, "attention_in_multiplier": 1.0}
    geometry = read_geometry(config)
    assert ignored_keys(config) == ["mamba_d_ssm", "mamba_n_heads", "mamba_d_state", "mamba_d_conv", "mamba_expand"]
    assert "is not one txviz knows" in geometry.assumptions[0]  # and the generic rule says it read it


def test_a_key_a_reader_reads_only_for_its_own_family_is_named_elsewhere():
    jamba_keys = {k: v for k, v in pub.JAMBA_1_5_MINI.items() if k.startswith(("mamba_", "attn_layer"))}
    assert ignored_keys({**hf.MISTRAL_7B_V01, **jamba_keys}) == list(jamba_keys)  # Mistral has no Mamba layers
    assert ignored_keys(pub.JAMBA_1_5_MINI) == []


def test_a_value_the_reader_takes_for_granted_is_named_only_when_it_differs():
    assert ignored_keys(pub.COMMAND_R7B) == []
    plain = {**pub.COMMAND_R7B, "use_gated_activation": False}
    (warning,) = read_geometry(plain).ignored
    assert warning == "`use_gated_activation` ignored: the figure assumes a gated (SwiGLU) MLP"


def test_a_multimodal_wrapper_is_judged_by_its_text_config():
    nested = {**pub.LLAMA_4_SCOUT, "text_config": {**pub.LLAMA_4_SCOUT["text_config"], "num_global_tokens": 4}}
    assert ignored_keys(pub.LLAMA_4_SCOUT) == [] and ignored_keys(nested) == ["num_global_tokens"]


def test_the_warnings_reach_the_calculator_model_and_txviz_memory(tmp_path, capsys):
    config = {**pub.QWEN3_NEXT_80B, "linear_num_extra_heads": 8}
    model = memory_model.MemoryModel.from_config_json(json.dumps(config).encode())
    assert [w.split("`")[1] for w in model.ignored] == ["linear_num_extra_heads"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert cli.main(["memory", "--json", "--config", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["warnings"] == list(model.ignored)
    assert [g["layer_type"] for g in out["layer_groups"]] == ["linear_attention", "full_attention"]
    assert out["layer_kinds"] == [g["summary"] for g in out["layer_groups"]]  # the sentences, near the top
    assert out["layer_kinds"][1] == "12 global layers grow by 24.0 KiB per token"


def test_txviz_memory_keeps_what_the_reading_left_out_among_its_notes(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(pub.LLAMA_4_SCOUT))
    assert cli.main(["memory", "--json", "--config", str(path), "--seq", "1000000"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes[0] == "the vision tower is not counted: text model only"
    assert "--seq 1,000,000 is longer than the 262,144 tokens the model was built for" in notes
