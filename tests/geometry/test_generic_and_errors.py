"""A config of a family txviz does not know: read by the generic rule with its assumptions said;
refused only when numbers are missing, naming each; bad values refused with a message, never a
traceback, by the library and by ``txviz memory --config ... --json``."""

from __future__ import annotations

import json

import pytest

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from txviz import cli
from txviz.geometry import GeometryError, read_config, read_geometry

# A made-up family with Llama's numbers and names: the generic rule must read it as Llama 3 8B.
UNKNOWN = {**hf.LLAMA_3_8B, "model_type": "acme_lm", "architectures": ["AcmeForCausalLM"]}


def test_an_unknown_family_is_read_by_the_generic_rule_and_says_what_it_assumed():
    geometry = read_geometry({k: v for k, v in UNKNOWN.items() if k != "tie_word_embeddings"})
    assert geometry.kv_elements_per_token() == 32 * 2 * 8 * 128
    assert geometry.n_params == 128256 * 4096 + 4096 + 32 * (4096 * (4096 + 2 * 1024) + 4096 * 4096
                                                             + 3 * 4096 * 14336 + 2 * 4096)  # tied: one table
    said = " ".join(geometry.assumptions)
    assert "'acme_lm' is not one txviz knows" in said and "Llama-like" in said
    assert "tie_word_embeddings" in said and "num_key_value_heads" not in said  # only what was missing


def test_the_generic_rule_takes_common_aliases_and_defaults_to_mha():
    geometry = read_geometry({"model_type": "acme_lm", "n_embd": 256, "n_head": 4, "n_layer": 3, "n_inner": 1024,
                              "vocab_size": 1000, "activation_function": "gelu_new"})
    assert geometry.kind == "MHA" and geometry.kv_elements_per_token() == 3 * 2 * 4 * 64
    assert geometry.n_params == 1000 * 256 + 256 + 3 * (4 * 256 * 256 + 2 * 256 * 1024 + 2 * 256)  # plain MLP
    assert any("as many KV heads as query heads" in a for a in geometry.assumptions)


def test_a_config_without_the_numbers_is_refused_naming_each():
    with pytest.raises(GeometryError) as error:
        read_geometry({"model_type": "acme_lm", "hidden_size": 512})
    message = str(error.value)
    for name in ("num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size"):
        assert name in message
    assert "hidden_size (or" not in message  # it was given
    with pytest.raises(GeometryError, match="kv_lora_rank"):
        read_geometry({k: v for k, v in pub.DEEPSEEK_V3.items() if k != "kv_lora_rank"})


@pytest.mark.parametrize("field,value,message", [
    ("num_hidden_layers", -4, "between 1 and"), ("hidden_size", 1 << 40, "beyond any real model"),
    ("num_attention_heads", "32", "whole number"), ("num_key_value_heads", 5, "not divisible"),
    ("vocab_size", True, "whole number"), ("sliding_window", 0.5, "whole number"),
    ("tie_word_embeddings", "yes", "true or false"),
])
def test_bad_values_are_refused_with_a_message(field, value, message):
    with pytest.raises(GeometryError, match=message):
        read_geometry({**hf.MISTRAL_7B_V01, field: value})


def test_text_and_files_are_read_like_dicts(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(pub.FALCON_7B))
    assert read_config(tmp_path) == read_config(json.dumps(pub.FALCON_7B).encode()) == read_geometry(pub.FALCON_7B)
    with pytest.raises(ValueError, match="not valid JSON"):
        read_config(b"{nope")


# ---- the CLI ----------------------------------------------------------------------------------------
def memory_json(capsys, tmp_path, config: dict, *argv: str) -> tuple[int, dict]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code = cli.main(["memory", "--config", str(path), *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("config,kind,per_token,n_params", [
    (pub.GEMMA_3_270M, "MQA", 18 * 2 * 1 * 256 * 2, 268_098_176),
    (pub.DEEPSEEK_V3, "MLA", 61 * (512 + 64) * 2, 671_026_404_352),
    (pub.FALCON_7B, "MQA", 32 * 2 * 1 * 64 * 2, 6_921_720_704),
    (pub.MPT_7B, "MHA", 32 * 2 * 32 * 128 * 2, 6_649_286_656),
    (pub.QWEN3_30B_A3B, "GQA", 48 * 2 * 4 * 128 * 2, 30_532_122_624),
    (pub.BLOOM_560M, "MHA", 24 * 2 * 16 * 64 * 2, 559_214_592),
])
def test_cli_answers_for_any_family(capsys, tmp_path, config, kind, per_token, n_params):
    code, out = memory_json(capsys, tmp_path, config, "--seq", "4096", "--weight-dtype", "int4")
    assert code == 0 and out["kind"] == kind and out["n_params"] == n_params
    assert out["kv_bytes_per_token"] == per_token and out["kv_bytes_per_token_by_dtype"]["fp8"] == per_token // 2
    assert out["weight_bytes"] == n_params // 2 and out["weight_bytes_by_dtype"]["fp32"] == 4 * n_params
    assert out["warnings"] == []


def test_cli_gemma3_cache_at_its_context_and_what_fits(capsys, tmp_path):
    code, out = memory_json(capsys, tmp_path, pub.GEMMA_3_270M, "--gpu-gib", "1")
    assert code == 0 and out["seq"] == 32768 and out["window_layers"] == 15
    assert out["kv_cache_bytes"] == (3 * 32768 + 15 * 512) * 2 * 256 * 2
    free = (1 << 30) - 2 * 268_098_176  # bf16 weights
    per_token_full = 3 * 2 * 256 * 2  # once every window is full only the 3 global layers grow
    assert out["max_context"]["max_tokens"] == (free - 15 * 512 * 2 * 256 * 2) // per_token_full
    assert out["kinds"]["MHA"]["kv_bytes_per_token"] == 18 * 2 * 4 * 256 * 2


def test_cli_generic_rule_warns(capsys, tmp_path):
    code, out = memory_json(capsys, tmp_path, UNKNOWN, "--seq", "8192")
    assert code == 0 and out["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2 and out["model_type"] == "acme_lm"
    assert any("not one txviz knows" in w for w in out["warnings"])


@pytest.mark.parametrize("config,argv,message", [
    ({"model_type": "acme_lm", "hidden_size": 64}, [], "lacks the numbers its size needs"),
    ({**hf.LLAMA_3_8B, "num_hidden_layers": -1}, [], "num_hidden_layers must be between"),
    ({**hf.LLAMA_3_8B, "num_hidden_layers": 1e9}, [], "num_hidden_layers = 1,000,000,000 is beyond any real model"),
    ({**hf.LLAMA_3_8B, "hidden_size": "big"}, [], "hidden_size must be a whole number"),
    (hf.LLAMA_3_8B, ["--gpu-gib", "1e300"], "--gpu-gib must be above 0"),
    (hf.LLAMA_3_8B, ["--gpu-gib", "nan"], "--gpu-gib must be above 0"),
    (hf.LLAMA_3_8B, ["--seq", "0"], "--seq must be"),
    (hf.LLAMA_3_8B, ["--batch", "-2"], "--batch"),
    ({k: v for k, v in pub.BLOOM_560M.items()}, [], "no context length"),  # ALiBi: no max_position_embeddings
])
def test_cli_refuses_bad_numbers_with_a_message(capsys, tmp_path, config, argv, message):
    code, out = memory_json(capsys, tmp_path, config, *argv)
    assert code == 2 and message in out["error"]


@pytest.mark.parametrize("layers,shown", [(1e300, "= 1e+300 is beyond"), (10 ** 400, "= a 401-digit number is"),
                                          (2 ** 31, "= 2,147,483,648 is"), (-4, "between 1 and 1,024, got -4")])
def test_a_count_out_of_range_is_refused_in_a_few_characters(layers, shown):
    """JSON's 1e300 once became a 301-digit integer in the refusal; the message keeps its
    meaning (the field, the range, the value) at a readable length."""
    with pytest.raises(GeometryError) as refused:
        read_geometry(json.loads(json.dumps({**hf.LLAMA_3_8B, "num_hidden_layers": layers})))
    message = str(refused.value)
    assert shown in message and "num_hidden_layers" in message and "1,024" in message
    assert len(message) < 120, message
