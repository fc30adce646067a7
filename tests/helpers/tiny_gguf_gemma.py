"""Write tiny Gemma-family GGUF files (archs gemma, gemma2, gemma3) the way llama.cpp's converter does,
and a tiny SentencePiece vocabulary shaped like Gemma's, for the loader's and tokenizer's tests.

Independent of txviz.loading: llama.cpp's tensor names (``gguf-py/gguf/tensor_mapping.py``), Q/K rows
NOT permuted (Gemma runs NEOX RoPE), norms stored as 1 + w (txviz's weights are already that, so they
are written as they are), and only the keys the converter writes: which layers slide and the local RoPE
base are not in the file.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType

from tests.helpers.tiny_gguf import GLOBAL_TO_GGUF, LAYER_TO_GGUF, _add_tensor
from txviz import ModelConfig

GEMMA_LAYER_TO_GGUF = {
    **LAYER_TO_GGUF,
    "attn.q_norm.weight": "attn_q_norm.weight", "attn.k_norm.weight": "attn_k_norm.weight",
    "post_attn_norm.weight": "post_attention_norm.weight", "post_ffn_norm.weight": "post_ffw_norm.weight",
}

# ---- a tiny SentencePiece vocabulary (types: 1 normal, 3 control, 4 user-defined, 6 byte) -------------
SPACE = "\u2581"
CONTROL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
USER_DEFINED = ["\n", "\n\n", "  ", "   ", "\t", "<s>", "<div>"]  # space runs stored as real spaces, as Gemma's
CHARACTERS = [SPACE, *"abcdefghijklmnopqrstuvwxyz", "T", "H", ",", ".", "!", "'", "0", "1", "2", "5", "é"]
# merged pieces, best first (scores -1, -2, …): what SentencePiece's BPE training would have listed
PIECES = ["he", "ll", SPACE + "t", "llo", "hello", SPACE + "w", "or", "ld", "orld", SPACE + "world", "th",
          SPACE + "th", SPACE + "the", "in", SPACE + "in", "12", SPACE + "a", "an", SPACE + "an", "is", SPACE + "is",
          "TH", "THE"]


def spm_vocab() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types) in the order llama.cpp writes them: control first, bytes, pieces."""
    tokens, scores, types = [], [], []

    def add(token: str, score: float, kind: int) -> None:
        tokens.append(token), scores.append(score), types.append(kind)

    for token in CONTROL:
        add(token, 0.0, 3)
    for token in USER_DEFINED:
        add(token, 0.0, 4)
    for byte in range(256):
        add(f"<0x{byte:02X}>", 0.0, 6)
    for rank, token in enumerate(PIECES):
        add(token, -float(rank + 1), 1)
    for rank, token in enumerate(CHARACTERS):  # single characters score lowest; they are never merge results
        add(token, -1000.0 - rank, 1)
    return tokens, scores, types


def spm_metadata(tokens=None, scores=None, types=None, **extra) -> dict:
    """The ``tokenizer.*`` key/values of a Gemma file, as GGUFHeader.metadata holds them."""
    if tokens is None:
        tokens, scores, types = spm_vocab()

    def index(token: str) -> int | None:
        return tokens.index(token) if token in tokens else None

    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": scores, "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.bos_token_id": index("<bos>"), "tokenizer.ggml.eos_token_id": index("<eos>"),
            "tokenizer.ggml.unknown_token_id": index("<unk>"), "tokenizer.ggml.padding_token_id": index("<pad>"),
            "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_space_prefix": False, **extra}


# ---- the file -----------------------------------------------------------------------------------------
def gemma_tensors(state: dict[str, torch.Tensor], config: ModelConfig) -> dict:
    out = {GLOBAL_TO_GGUF[k]: v.numpy() for k, v in state.items() if k in GLOBAL_TO_GGUF}
    for i in range(config.n_layers):
        for name, gguf_name in GEMMA_LAYER_TO_GGUF.items():
            if f"layers.{i}.{name}" in state:
                out[f"blk.{i}.{gguf_name}"] = state[f"layers.{i}.{name}"].numpy()
    return out


def _add_hparams(writer: gguf.GGUFWriter, arch: str, config: ModelConfig) -> None:
    writer.add_context_length(config.max_seq_len)
    writer.add_embedding_length(config.d_model)
    writer.add_block_count(config.n_layers)
    writer.add_feed_forward_length(config.ffn_hidden)
    writer.add_head_count(config.n_heads)
    writer.add_head_count_kv(config.n_kv_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_layer_norm_rms_eps(config.norm_eps)
    if config.sliding_window:
        writer.add_key_value(f"{arch}.attention.sliding_window", config.sliding_window, GGUFValueType.UINT32)
    for key, value in (("attn_logit_softcapping", config.attn_softcap),
                       ("final_logit_softcapping", config.final_softcap)):
        if value:
            writer.add_key_value(f"{arch}.{key}", value, GGUFValueType.FLOAT32)


def _add_spm_tokenizer(writer: gguf.GGUFWriter) -> None:
    tokens, scores, types = spm_vocab()
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(tokens.index("<bos>"))
    writer.add_eos_token_id(tokens.index("<eos>"))
    writer.add_unk_token_id(tokens.index("<unk>"))
    writer.add_pad_token_id(tokens.index("<pad>"))
    writer.add_add_bos_token(True)
    writer.add_add_space_prefix(False)


def write_gemma_gguf(path: Path, arch: str, config: ModelConfig, state: dict[str, torch.Tensor], *,
                     qtype: Q = Q.F32, metadata: dict | None = None, drop: tuple[str, ...] = ()) -> Path:
    """A GGUF of ``state`` (txviz names, norms already 1 + w) as llama.cpp writes ``arch``; ``metadata``
    adds raw key/values ({key: (value, GGUFValueType)}); ``drop`` leaves GGUF tensors out."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(config.name)
    _add_hparams(writer, arch, config)
    for key, (value, kind) in (metadata or {}).items():
        writer.add_key_value(key.format(arch=arch), value, kind)
    _add_spm_tokenizer(writer)
    for name, array in gemma_tensors(state, config).items():
        if name not in drop:
            _add_tensor(writer, name, array, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return Path(path)
