"""Published quantization sizes the weights as they are served: gpt-oss-120b's mxfp4 experts and
DeepSeek-V3's fp8 weights, the bitsandbytes, GPTQ and AWQ schemes, each with the tensors it leaves in
the checkpoint's dtype said; the calculator and ``txviz memory`` open such a model at its published format."""

from __future__ import annotations

import json
import math

import pytest

from tests.helpers import published_geometry_configs as pub
from tests.helpers import published_hf_configs as hf
from txviz import cli
from txviz.analysis.kv import memory, memory_model
from txviz.analysis.kv.fit import fit
from txviz.geometry import GeometryError, read_geometry

GIB = 1 << 30
GPT_OSS_EXPERTS = 36 * 128 * (3 * 2880 * 2880 + 3 * 2880)  # layers × experts × (gate, up, down and their biases)


def model_of(config: dict) -> memory_model.MemoryModel:
    return memory_model.MemoryModel.from_config_json(json.dumps(config).encode())


def test_gpt_oss_120b_experts_are_mxfp4_and_it_fits_an_80_gib_gpu():
    model = model_of(pub.GPT_OSS_120B)
    rest = model.n_params - GPT_OSS_EXPERTS  # attention, router, embeddings, norms: bf16
    expected = math.ceil(GPT_OSS_EXPERTS * (4 + 8 / 32) / 8 + rest * 2)
    assert memory.weight_bytes(model, memory.PUBLISHED) == expected
    assert 60 < expected / GIB < 61.5  # the checkpoint is about 65 GB
    assert memory.weight_dtypes(model)[0] == memory.PUBLISHED
    lengths = memory.context_lengths(131072)
    assert fit(model, lengths, 80.0, weight_dtype=memory.PUBLISHED).longest > 0
    assert not fit(model, lengths, 80.0, weight_dtype="bf16").weights_fit  # bf16: about 218 GiB
    assumption = model.weight_format.assumption
    assert "routed experts quantized" in assumption and "attention projections" in assumption.split("stay")[0]


def test_deepseek_v3_is_fp8_with_block_scales_and_embeddings_routers_norms_in_bf16():
    model = model_of(pub.DEEPSEEK_V3_FP8)
    groups = dict(model.param_groups)
    assert sum(groups.values()) == model.n_params == 671_026_404_352
    embeddings, routers = 2 * 129280 * 7168, (61 - 3) * 256 * 7168  # untied table and head; 58 MoE layers
    small = 61 * (2 * 7168 + 1536 + 512) + 7168  # RMSNorms (two per layer, the q and kv latents'), the final one
    assert (groups["embeddings"], groups["router"], groups["small"]) == (embeddings, routers, small)
    kept = embeddings + routers + small
    expected = math.ceil((model.n_params - kept) * (8 + 32 / (128 * 128)) / 8 + kept * 2)
    assert memory.weight_bytes(model, memory.PUBLISHED) == expected
    assert "routers, norms and biases stay bfloat16" in model.weight_format.assumption


def test_bitsandbytes_gptq_and_awq_cover_the_layers_linear_weights():
    llama = model_of(hf.LLAMA_3_8B)
    kept = 2 * 128256 * 4096 + (2 * 32 + 1) * 4096  # untied embeddings and head, RMSNorms: stay bf16
    linear = llama.n_params - kept
    cases = {"nf4, double quant": ({"quant_method": "bitsandbytes", "load_in_4bit": True,
                                    "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True},
                                   4 + 8 / 64 + 32 / (64 * 256)),
             "8-bit": ({"load_in_8bit": True}, 8),
             "gptq": ({"quant_method": "gptq", "bits": 4, "group_size": 128}, 4 + (16 + 4) / 128),
             "awq": ({"quant_method": "awq", "bits": 4, "group_size": 64}, 4 + (16 + 4) / 64)}
    for name, (config, bits) in cases.items():
        model = model_of({**hf.LLAMA_3_8B, "quantization_config": config})
        assert memory.weight_bytes(model, memory.PUBLISHED) == math.ceil(linear * bits / 8 + kept * 2), name
    assert memory.weight_bytes(model_of(hf.LLAMA_3_8B), "bf16") == 2 * llama.n_params  # no config: as before
    with pytest.raises(ValueError, match="no published quantization"):
        memory.weight_bytes(llama, memory.PUBLISHED)


def test_an_unknown_scheme_is_said_and_bad_fields_are_refused():
    geometry = read_geometry({**hf.LLAMA_3_8B, "quantization_config": {"quant_method": "hqq"}})
    assert geometry.weight_format is None and any("(hqq) is not read" in note for note in geometry.notes)
    for bad in ("fp8", {"quant_method": "gptq", "bits": 99}, {"quant_method": "fp8", "weight_block_size": [0, 1]}):
        with pytest.raises(GeometryError, match="quantization_config"):
            read_geometry({**hf.LLAMA_3_8B, "quantization_config": bad})


def test_the_cli_sizes_published_weights_by_default(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(pub.GPT_OSS_120B))
    assert cli.main(["memory", "--config", str(path), "--gpu-gib", "80", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["weight_dtype"] == memory.PUBLISHED and out["weight_format"]["scheme"] == "mxfp4"
    assert out["weight_bytes"] == out["weight_bytes_by_dtype"][memory.PUBLISHED] < 61.5 * GIB
    assert out["fits"]["longest_tokens"] != 0
    assert out["weight_format"]["assumption"] in out["notes"]
    assert cli.main(["memory", "--config", str(path), "--weight-dtype", "bf16", "--gpu-gib", "80", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fits"]["longest_tokens"] == 0
    path.write_text(json.dumps(hf.LLAMA_3_8B))
    assert cli.main(["memory", "--config", str(path), "--weight-dtype", memory.PUBLISHED, "--json"]) == 2
    assert "publishes no quantization" in json.loads(capsys.readouterr().out)["error"]
