"""llama.cpp's converter in miniature: a tiny transformers model → a GGUF file, as ``convert_hf_to_gguf.py``
would write it, for the GGUF parity tests.

Independent of txviz.loading.gguf: the tensor names come from the ``gguf`` package's own map
(``gguf.get_tensor_name_map``, what the converter calls), the metadata keys from ``GGUFWriter``'s own
``add_*`` methods, and the per-architecture steps are the converter's: Q/K rows permuted for llama (its
``LlamaModel.permute``), Llama 3's rope scaling stored as per-pair divisors (``rope_freqs``), Gemma's norm
weights stored as w + 1, Qwen3-MoE's experts stacked (E, out, in),
a tied ``lm_head`` left out (a checkpoint does not store it), 1-D tensors kept F32 and the rest stored as
``qtype``. The tokenizer is a tiny byte-level BPE (or Gemma's SentencePiece) vocabulary, so the model's
vocabulary size is that list's length (``vocab_size_for``).
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType

from tests.helpers.tiny_gguf import _add_tensor, _add_tokenizer, quantize_roundtrip, tiny_vocab
from tests.helpers.tiny_gguf_gemma import _add_spm_tokenizer, spm_vocab

GEMMA_ARCHS = ("gemma", "gemma2", "gemma3")
PRE_TOKENIZER = {"llama": "smollm", "qwen2": "qwen2", "qwen3": "qwen2", "qwen3moe": "qwen2", "qwen2moe": "qwen2",
                 "phi3": "smollm", "olmoe": "smollm"}


def vocab_size_for(arch: str) -> int:
    return len(spm_vocab()[0]) if arch in GEMMA_ARCHS else len(tiny_vocab())


def _hparams(writer: gguf.GGUFWriter, arch: str, config) -> None:
    """``TextModel.set_gguf_parameters`` and each architecture's additions."""
    params = getattr(config, "rope_parameters", None) or {}
    params = params.get("full_attention", params)  # Gemma 3's per-kind RoPE: the file's base is the global one
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if "head_dim" in config.to_dict() and config.head_dim:
        writer.add_key_length(config.head_dim)
        writer.add_value_length(config.head_dim)
    if arch == "llama":
        writer.add_vocab_size(config.vocab_size)
        writer.add_rope_dimension_count(head_dim)
    if arch == "phi3":
        writer.add_rope_dimension_count(int(head_dim * params.get("partial_rotary_factor", 1.0)))
        if config.sliding_window:
            writer.add_sliding_window(config.sliding_window)
    if arch in ("gemma2", "gemma3"):
        writer.add_sliding_window(config.sliding_window)
    if arch == "gemma2":
        writer.add_key_value("gemma2.attn_logit_softcapping", config.attn_logit_softcapping, GGUFValueType.FLOAT32)
        writer.add_key_value("gemma2.final_logit_softcapping", config.final_logit_softcapping, GGUFValueType.FLOAT32)
    for setter, keys in ((writer.add_expert_count, ("num_experts", "num_local_experts")),
                         (writer.add_expert_used_count, ("num_experts_per_tok",)),
                         (writer.add_expert_feed_forward_length, ("moe_intermediate_size",)),
                        (writer.add_expert_shared_feed_forward_length, ("shared_expert_intermediate_size",))):
        value = next((getattr(config, key) for key in keys if getattr(config, key, None)), None)
        if value:
            setter(value)


def permute(weights: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """convert_hf_to_gguf.py, ``LlamaModel.permute``: each head's rows reordered for adjacent-pair RoPE."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def _modified(arch: str, config, name: str, data: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Each architecture's ``modify_tensors``: (HF name, array) pairs to map and write."""
    if arch == "llama" and name.endswith(("q_proj.weight", "q_proj.bias")):
        return [(name, permute(data, config.num_attention_heads, config.num_attention_heads))]
    if arch == "llama" and name.endswith(("k_proj.weight", "k_proj.bias")):
        return [(name, permute(data, config.num_attention_heads, config.num_key_value_heads))]
    if arch in GEMMA_ARCHS and name.endswith("norm.weight"):
        return [(name, data + 1)]
    if name.endswith("mlp.experts.gate_up_proj"):  # transformers 5 keeps experts fused: (E, 2F, d)
        gate, up = np.split(data, 2, axis=1)
        stem = name.removesuffix("gate_up_proj")
        return [(stem + "gate_proj.weight", gate), (stem + "up_proj.weight", up)]
    if name.endswith("mlp.experts.down_proj"):  # (E, d, F)
        return [(name + ".weight", data)]
    if name.endswith("shared_expert_gate.weight"):  # (1, d) in the checkpoint, a vector in llama.cpp's file
        return [(name, data.reshape(-1))]
    return [(name, data)]


def llama3_rope_freqs(config) -> np.ndarray | None:
    """``LlamaModel.generate_extra_tensors``: for rope_type "llama3", one float32 divisor per rotated pair —
    1 for short wavelengths, ``factor`` for long ones, a ramp between; the original context is the config's
    top-level ``original_max_position_embeddings`` (8192 without it, as the converter reads it)."""
    params = getattr(config, "rope_parameters", None) or {}
    if params.get("rope_type") != "llama3":
        return None
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    freqs = 1.0 / (params.get("rope_theta", 10000.0) ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = (params.get(k, d) for k, d in (("factor", 8.0), ("low_freq_factor", 1.0),
                                                        ("high_freq_factor", 4.0)))
    old = config.to_dict().get("original_max_position_embeddings") or 8192
    divisors = []
    for freq in freqs:
        wavelen = 2 * np.pi / freq
        if wavelen < old / high:
            divisors.append(1.0)
        elif wavelen > old / low:
            divisors.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            divisors.append(float(1 / ((1 - smooth) / factor + smooth)))
    return np.array(divisors, dtype=np.float32)


def gguf_tensors(model: torch.nn.Module, arch: str) -> dict[str, np.ndarray]:
    """The model's tensors under llama.cpp's names, as the converter transforms them."""
    config = model.config
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], config.num_hidden_layers)
    out = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        for hf_name, data in _modified(arch, config, name, tensor.detach().float().numpy()):
            gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if gguf_name is None:
                raise KeyError(f"llama.cpp's {arch} has no tensor for {hf_name}")
            out[gguf_name] = data
    rope_freqs = llama3_rope_freqs(config) if arch == "llama" else None
    if rope_freqs is not None:
        out[gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight"] = rope_freqs
    params = getattr(config, "rope_parameters", None) or {}
    if arch == "phi3" and params.get("rope_type") == "longrope":  # Phi3MiniModel.generate_extra_tensors
        for kind in ("long", "short"):
            tensor = gguf.TENSOR_NAMES[gguf.MODEL_TENSOR[f"ROPE_FACTORS_{kind.upper()}"]]
            out[f"{tensor}.weight"] = np.array(params[f"{kind}_factor"], dtype=np.float32)
    return out


def write_model_gguf(path: Path, model: torch.nn.Module, arch: str, *, qtype: Q = Q.F32, name: str = "tiny") -> Path:
    """``model`` (a tiny transformers model) as llama.cpp's converter writes ``arch``, its matrices as ``qtype``."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    _hparams(writer, arch, model.config)
    if arch in GEMMA_ARCHS:
        _add_spm_tokenizer(writer)
    else:
        _add_tokenizer(writer, PRE_TOKENIZER[arch])
        writer.add_pad_token_id(0)  # else transformers keeps Phi-3's default pad id 32000, beyond this vocabulary
    for gguf_name, array in gguf_tensors(model, arch).items():
        _add_tensor(writer, gguf_name, array, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)


def as_stored(model: torch.nn.Module, qtype: Q) -> torch.nn.Module:
    """A copy of ``model`` whose matrices are what a ``qtype`` file holds (gguf's own codec, blocks along each
    row, as ``write_model_gguf`` stores them); vectors stay as they are, as the file keeps them F32."""
    import copy

    stored = copy.deepcopy(model)
    with torch.no_grad():
        for param in stored.parameters():
            if param.dim() >= 2:
                flat = param.detach().reshape(-1, param.shape[-1]).numpy()
                param.copy_(torch.from_numpy(quantize_roundtrip(flat, qtype)).reshape(param.shape))
    return stored
