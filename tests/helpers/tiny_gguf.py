"""Write tiny llama-architecture GGUF files the way llama.cpp's converter does, for the loader's tests.

The writer is the reference, kept independent of txviz.loading.gguf: its own name table (from
llama.cpp's ``gguf-py/gguf/tensor_mapping.py``) and llama.cpp's own Q/K row permutation, copied from
``convert_hf_to_gguf.py`` (``LlamaModel.permute``).
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q

from tests.helpers.tiny import random_decoder
from txviz import ModelConfig

# a byte-level vocabulary: three control tokens, the 256 byte stand-ins, three merges
CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he"]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
          "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
          "{% endif %}")


def byte_tokens() -> list[str]:
    from txviz.loading.tokenizer.tokenizer import byte_level_alphabet

    by_byte = {b: ch for ch, b in byte_level_alphabet().items()}
    return [by_byte[b] for b in range(256)]


def tiny_vocab() -> list[str]:
    return CONTROL_TOKENS + byte_tokens() + [m.replace(" ", "") for m in MERGES]


# d_model, ffn_hidden and n_heads·head_dim are multiples of 32: every block quantization applies
TINY = dict(vocab_size=len(tiny_vocab()), d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=96,
            max_seq_len=64, rope_theta=5000.0, norm_eps=2.0 ** -20, name="tiny-llama")  # float32-exact


def tiny(**overrides) -> ModelConfig:
    return ModelConfig(**{**TINY, **overrides})


def weights_of(config: ModelConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in random_decoder(config, seed).state_dict().items()}


def llamacpp_permute(weights: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """convert_hf_to_gguf.py, LlamaModel.permute, verbatim."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


LAYER_TO_GGUF = {
    "attn_norm.weight": "attn_norm.weight", "attn.q_proj.weight": "attn_q.weight",
    "attn.k_proj.weight": "attn_k.weight", "attn.v_proj.weight": "attn_v.weight",
    "attn.o_proj.weight": "attn_output.weight", "ffn_norm.weight": "ffn_norm.weight",
    "ffn.gate_proj.weight": "ffn_gate.weight", "ffn.up_proj.weight": "ffn_up.weight",
    "ffn.down_proj.weight": "ffn_down.weight", "ffn.router.weight": "ffn_gate_inp.weight",
}
GLOBAL_TO_GGUF = {"embed.weight": "token_embd.weight", "final_norm.weight": "output_norm.weight",
                  "lm_head.weight": "output.weight"}


def gguf_tensors(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, np.ndarray]:
    """txviz weights (reference layout) → llama.cpp's names, permuted Q/K, stacked experts."""
    out = {GLOBAL_TO_GGUF[k]: v.numpy() for k, v in state.items() if k in GLOBAL_TO_GGUF}
    for i in range(config.n_layers):
        prefix = f"layers.{i}."
        for name, gguf_name in LAYER_TO_GGUF.items():
            if prefix + name in state:
                out[f"blk.{i}.{gguf_name}"] = state[prefix + name].numpy()
        out[f"blk.{i}.attn_q.weight"] = llamacpp_permute(out[f"blk.{i}.attn_q.weight"], config.n_heads,
                                                         config.n_heads)
        out[f"blk.{i}.attn_k.weight"] = llamacpp_permute(out[f"blk.{i}.attn_k.weight"], config.n_heads,
                                                         config.n_kv_heads)
        for part, gguf_part in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
            experts = [state[f"{prefix}ffn.experts.{e}.{part}.weight"].numpy() for e in range(config.n_experts)]
            if experts:
                out[f"blk.{i}.ffn_{gguf_part}_exps.weight"] = np.stack(experts)  # (E, out, in)
    return out


def quantize_roundtrip(array: np.ndarray, qtype: Q) -> np.ndarray:
    """What a loader should get back for ``array`` stored as ``qtype`` (gguf's own codec)."""
    if qtype == Q.F32:
        return array.astype(np.float32)
    if qtype == Q.F16:
        return array.astype(np.float16).astype(np.float32)
    return gguf.quants.dequantize(gguf.quants.quantize(array.astype(np.float32), qtype), qtype)


def _add_tensor(writer: gguf.GGUFWriter, name: str, array: np.ndarray, qtype: Q) -> None:
    if array.ndim == 1 or qtype == Q.F32:  # llama.cpp keeps norms in F32
        writer.add_tensor(name, array.astype(np.float32))
    elif qtype == Q.F16:
        writer.add_tensor(name, array.astype(np.float16))
    else:
        writer.add_tensor(name, gguf.quants.quantize(array.astype(np.float32), qtype), raw_dtype=qtype)


def _add_hparams(writer: gguf.GGUFWriter, config: ModelConfig) -> None:
    writer.add_block_count(config.n_layers)
    writer.add_context_length(config.max_seq_len)
    writer.add_embedding_length(config.d_model)
    writer.add_feed_forward_length(config.ffn_hidden)
    writer.add_head_count(config.n_heads)
    writer.add_head_count_kv(config.n_kv_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_layer_norm_rms_eps(config.norm_eps)
    writer.add_vocab_size(config.vocab_size)
    if config.n_experts:
        writer.add_expert_count(config.n_experts)
        writer.add_expert_used_count(config.top_k)


def _add_tokenizer(writer: gguf.GGUFWriter, pre: str) -> None:
    tokens = tiny_vocab()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([3] * len(CONTROL_TOKENS) + [1] * (len(tokens) - len(CONTROL_TOKENS)))
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)


def write_gguf(path: Path, config: ModelConfig, state: dict[str, torch.Tensor], *, qtype: Q = Q.F32,
               qtypes: dict[str, Q] | None = None, arch: str = "llama", pre: str = "smollm",
               extra: dict[str, np.ndarray] | None = None, metadata: dict | None = None) -> Path:
    """A GGUF of ``state`` (txviz names, reference layout). ``qtypes`` overrides per GGUF tensor name;
    ``metadata`` adds raw key/values (e.g. rope scaling); ``extra`` adds tensors as they are."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(config.name)
    _add_hparams(writer, config)
    for key, value in (metadata or {}).items():
        writer.add_key_value(key.format(arch=arch), *value)
    _add_tokenizer(writer, pre)
    for name, array in {**gguf_tensors(state, config), **(extra or {})}.items():
        if array.dtype.kind in "iu":
            writer.add_tensor(name, array)
        else:
            _add_tensor(writer, name, array, (qtypes or {}).get(name, qtype))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)
