"""Broken Hugging Face checkpoints, each written into a directory by a small function, with the words the
loader's error must contain: missing files, pickles, unsupported architectures, mismatched shapes."""

from __future__ import annotations

import pickle

import torch
from safetensors.torch import load_file, save_file

from tests.helpers.tiny_hf import build, edit_config, save, save_state_dict

def _no_config(d):
    save(build("llama_gqa"), d)
    (d / "config.json").unlink()


def _no_weights(d):
    build("llama_gqa").config.save_pretrained(d)


def _only_pickle(d):
    class Trap:  # unpickling this would create a file: it must never happen
        def __reduce__(self):
            return (open, (str(d / "UNPICKLED"), "w"))

    build("llama_gqa").config.save_pretrained(d)
    (d / "pytorch_model.bin").write_bytes(pickle.dumps(Trap()))


def _other_safetensors_name(d):
    save(build("llama_gqa"), d)
    (d / "model.safetensors").rename(d / "consolidated.safetensors")


def _architecture(name, model_type):
    def setup(d):
        save(build("llama_gqa"), d)
        edit_config(d, lambda c: {**c, "architectures": [name], "model_type": model_type})
    return setup


def _config_edit(variant, **changes):
    def setup(d):
        save(build(variant), d)
        edit_config(d, lambda c: {**c, **changes})
    return setup


def _config_text(text):
    def setup(d):
        save(build("llama_gqa"), d)
        (d / "config.json").write_text(text)
    return setup


def _fused_mismatch(d):
    save_state_dict(build("mixtral"), d)
    edit_config(d, lambda c: {**c, "intermediate_size": 80})


def _missing_shard(d):
    save(build("llama_gqa"), d, max_shard_size="40KB")
    sorted(d.glob("model-*.safetensors"))[-1].unlink()


def _corrupt_weights(d):
    save(build("llama_gqa"), d)
    (d / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header")


def _extra_tensor(d):
    hf_model = build("llama_gqa")
    hf_model.register_parameter("stray", torch.nn.Parameter(torch.zeros(3)))
    save_state_dict(hf_model, d)


def _untied_head_in_tied_model(d):
    save(build("llama_tied"), d)
    tensors = load_file(d / "model.safetensors")
    save_file({**tensors, "lm_head.weight": torch.randn_like(tensors["model.embed_tokens.weight"])},
              d / "model.safetensors")


def _partial_window(d):
    save(build("qwen2"), d)
    edit_config(d, lambda c: {**c, "layer_types": ["full_attention", "sliding_attention"],
                              "use_sliding_window": True, "sliding_window": 4})


BROKEN = {
    "no_config_json": (_no_config, "no config.json"),
    "no_weights": (_no_weights, "has no weights"),
    "only_pytorch_model_bin": (_only_pickle, "loads only safetensors"),
    "unlisted_safetensors": (_other_safetensors_name, "consolidated.safetensors"),
    "unsupported_architecture": (_architecture("BertForMaskedLM", "bert"), "MixtralForCausalLM"),
    "classifier_head": (_architecture("LlamaForSequenceClassification", "llama"), "only causal"),
    "kv_heads_mismatch": (_config_edit("llama_gqa", num_key_value_heads=1), "k_proj"),
    "ffn_width_mismatch": (_config_edit("llama_gqa", intermediate_size=80), "do not match config.json"),
    "gpt2_fused_qkv_mismatch": (_config_edit("gpt2", n_embd=32), "c_attn"),
    "mixtral_fused_mismatch": (_fused_mismatch, r"mlp\.experts\..*does not match"),
    "config_not_json": (_config_text("{not json"), "not valid JSON"),
    "config_not_an_object": (_config_text("[1, 2, 3]"), "JSON object"),
    "config_number_as_text": (_config_edit("llama_gqa", hidden_size="64"), "hidden_size"),
    "config_huge": (_config_text("{" + " " * (2 << 20) + "}"), "too large"),
    "config_impossible_heads": (_config_edit("llama_gqa", num_key_value_heads=3), "n_kv_heads"),
    "unsupported_rope": (_config_edit("llama_gqa", rope_parameters={"rope_type": "longrope", "rope_theta": 1e4}),
                         "longrope"),
    "missing_shard": (_missing_shard, "missing"),
    "corrupt_safetensors": (_corrupt_weights, "not a readable safetensors file"),
    "stray_tensor": (_extra_tensor, "stray"),
    "window_on_some_layers": (_partial_window, "only some layers"),
    "tied_but_different_lm_head": (_untied_head_in_tied_model, "different lm_head"),
    "quantized": (_config_edit("llama_gqa", quantization_config={"quant_method": "gptq", "bits": 4}), "gptq"),
}

