"""Hugging Face checkpoint tensor names → txviz parameter names (transformer.py lists the targets).

Per family: a few small named transforms that bring every supported on-disk layout to the family's
classic one, then a name table that renames it one to one (gpt-fast ``convert_hf_checkpoint.py``).
Nothing else touches the weights: no permutes, no rescaling; the one fold is Gemma's RMSNorm, which
multiplies by (1 + w): ``fold_gemma_norms`` stores 1 + w (in fp32), so txviz's one RMSNorm (× w) gives
the same numbers. In the tables ``{i}`` is a layer, ``{e}`` an expert and ``{p}`` ``weight`` or ``bias``.
"""

from __future__ import annotations

import re
from typing import Callable

import torch

from txviz.config import ModelConfig
from txviz.loading.errors import ModelLoadError
from txviz.loading.hf.families import granitemoe, qwen2_moe, qwen3_moe
from txviz.loading.hf.families.expert_weights import split_stacked_experts
from txviz.loading.hf.families import gemma3_multimodal, gpt_oss, mxfp4

Tensors = dict[str, torch.Tensor]
Transform = Callable[[Tensors, ModelConfig], Tensors]

LLAMA_NAMES = {
    "model.embed_tokens.weight": "embed.weight",
    "model.norm.weight": "final_norm.weight",
    "lm_head.weight": "lm_head.weight",
    "model.layers.{i}.input_layernorm.weight": "layers.{i}.attn_norm.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "layers.{i}.ffn_norm.weight",
    "model.layers.{i}.self_attn.q_proj.{p}": "layers.{i}.attn.q_proj.{p}",
    "model.layers.{i}.self_attn.k_proj.{p}": "layers.{i}.attn.k_proj.{p}",
    "model.layers.{i}.self_attn.v_proj.{p}": "layers.{i}.attn.v_proj.{p}",
    "model.layers.{i}.self_attn.o_proj.{p}": "layers.{i}.attn.o_proj.{p}",
    "model.layers.{i}.mlp.gate_proj.{p}": "layers.{i}.ffn.gate_proj.{p}",
    "model.layers.{i}.mlp.up_proj.{p}": "layers.{i}.ffn.up_proj.{p}",
    "model.layers.{i}.mlp.down_proj.{p}": "layers.{i}.ffn.down_proj.{p}",
}

MIXTRAL_NAMES = {
    **{hf: ours for hf, ours in LLAMA_NAMES.items() if ".mlp." not in hf},
    "model.layers.{i}.block_sparse_moe.gate.weight": "layers.{i}.ffn.router.weight",
    "model.layers.{i}.block_sparse_moe.experts.{e}.w1.weight": "layers.{i}.ffn.experts.{e}.gate_proj.weight",
    "model.layers.{i}.block_sparse_moe.experts.{e}.w3.weight": "layers.{i}.ffn.experts.{e}.up_proj.weight",
    "model.layers.{i}.block_sparse_moe.experts.{e}.w2.weight": "layers.{i}.ffn.experts.{e}.down_proj.weight",
}

# gpt-oss: Llama's attention and norms, a learned sink per head, and a router with experts (unfused from
# transformers' stacked tensors by gpt_oss.unfuse_experts before these names apply)
GPT_OSS_NAMES = {
    **{hf: ours for hf, ours in LLAMA_NAMES.items() if ".mlp." not in hf},
    "model.layers.{i}.self_attn.sinks": "layers.{i}.attn.sinks",
    "model.layers.{i}.mlp.router.{p}": "layers.{i}.ffn.router.{p}",
    "model.layers.{i}.mlp.experts.{e}.gate_proj.{p}": "layers.{i}.ffn.experts.{e}.gate_proj.{p}",
    "model.layers.{i}.mlp.experts.{e}.up_proj.{p}": "layers.{i}.ffn.experts.{e}.up_proj.{p}",
    "model.layers.{i}.mlp.experts.{e}.down_proj.{p}": "layers.{i}.ffn.experts.{e}.down_proj.{p}",
}

# Gemma 2/3: a norm before and after each sublayer; transformers' post_attention_layernorm is the
# attention's post-norm there (in Llama and Gemma 1 it is the norm before the FFN).
GEMMA2_NAMES = {
    **{hf: ours for hf, ours in LLAMA_NAMES.items() if "layernorm" not in hf},
    "model.layers.{i}.input_layernorm.weight": "layers.{i}.attn_norm.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "layers.{i}.post_attn_norm.weight",
    "model.layers.{i}.pre_feedforward_layernorm.weight": "layers.{i}.ffn_norm.weight",
    "model.layers.{i}.post_feedforward_layernorm.weight": "layers.{i}.post_ffn_norm.weight",
}
GEMMA3_NAMES = {
    **GEMMA2_NAMES,
    "model.layers.{i}.self_attn.q_norm.weight": "layers.{i}.attn.q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight": "layers.{i}.attn.k_norm.weight",
}

GPT2_NAMES = {
    "transformer.wte.weight": "embed.weight",
    "transformer.wpe.weight": "positions.weight",
    "transformer.ln_f.{p}": "final_norm.{p}",
    "lm_head.weight": "lm_head.weight",
    "transformer.h.{i}.ln_1.{p}": "layers.{i}.attn_norm.{p}",
    "transformer.h.{i}.ln_2.{p}": "layers.{i}.ffn_norm.{p}",
    "transformer.h.{i}.attn.q_proj.{p}": "layers.{i}.attn.q_proj.{p}",  # from c_attn, see split_fused_qkv
    "transformer.h.{i}.attn.k_proj.{p}": "layers.{i}.attn.k_proj.{p}",
    "transformer.h.{i}.attn.v_proj.{p}": "layers.{i}.attn.v_proj.{p}",
    "transformer.h.{i}.attn.c_proj.{p}": "layers.{i}.attn.o_proj.{p}",
    "transformer.h.{i}.mlp.c_fc.{p}": "layers.{i}.ffn.up_proj.{p}",
    "transformer.h.{i}.mlp.c_proj.{p}": "layers.{i}.ffn.down_proj.{p}",
}

BLOOM_NAMES = {
    "transformer.word_embeddings.weight": "embed.weight",
    "transformer.word_embeddings_layernorm.{p}": "embed_norm.{p}",
    "transformer.ln_f.{p}": "final_norm.{p}",
    "lm_head.weight": "lm_head.weight",
    "transformer.h.{i}.input_layernorm.{p}": "layers.{i}.attn_norm.{p}",
    "transformer.h.{i}.post_attention_layernorm.{p}": "layers.{i}.ffn_norm.{p}",
    "transformer.h.{i}.self_attention.q_proj.{p}": "layers.{i}.attn.q_proj.{p}",  # split_per_head_qkv
    "transformer.h.{i}.self_attention.k_proj.{p}": "layers.{i}.attn.k_proj.{p}",
    "transformer.h.{i}.self_attention.v_proj.{p}": "layers.{i}.attn.v_proj.{p}",
    "transformer.h.{i}.self_attention.dense.{p}": "layers.{i}.attn.o_proj.{p}",
    "transformer.h.{i}.mlp.dense_h_to_4h.{p}": "layers.{i}.ffn.up_proj.{p}",
    "transformer.h.{i}.mlp.dense_4h_to_h.{p}": "layers.{i}.ffn.down_proj.{p}",
}

MPT_NAMES = {
    "transformer.wte.weight": "embed.weight",
    "transformer.norm_f.weight": "final_norm.weight",
    "lm_head.weight": "lm_head.weight",
    "transformer.blocks.{i}.norm_1.weight": "layers.{i}.attn_norm.weight",
    "transformer.blocks.{i}.norm_2.weight": "layers.{i}.ffn_norm.weight",
    "transformer.blocks.{i}.attn.q_proj.weight": "layers.{i}.attn.q_proj.weight",  # split_stacked_qkv
    "transformer.blocks.{i}.attn.k_proj.weight": "layers.{i}.attn.k_proj.weight",
    "transformer.blocks.{i}.attn.v_proj.weight": "layers.{i}.attn.v_proj.weight",
    "transformer.blocks.{i}.attn.out_proj.weight": "layers.{i}.attn.o_proj.weight",
    "transformer.blocks.{i}.ffn.up_proj.weight": "layers.{i}.ffn.up_proj.weight",
    "transformer.blocks.{i}.ffn.down_proj.weight": "layers.{i}.ffn.down_proj.weight",
}

GPT_NEOX_NAMES = {
    "gpt_neox.embed_in.weight": "embed.weight",
    "gpt_neox.final_layer_norm.{p}": "final_norm.{p}",
    "embed_out.weight": "lm_head.weight",  # published checkpoints; transformers 5 saves lm_head
    "lm_head.weight": "lm_head.weight",
    "gpt_neox.layers.{i}.input_layernorm.{p}": "layers.{i}.attn_norm.{p}",
    "gpt_neox.layers.{i}.post_attention_layernorm.{p}": "layers.{i}.ffn_norm.{p}",
    "gpt_neox.layers.{i}.attention.q_proj.{p}": "layers.{i}.attn.q_proj.{p}",  # split_per_head_qkv
    "gpt_neox.layers.{i}.attention.k_proj.{p}": "layers.{i}.attn.k_proj.{p}",
    "gpt_neox.layers.{i}.attention.v_proj.{p}": "layers.{i}.attn.v_proj.{p}",
    "gpt_neox.layers.{i}.attention.dense.{p}": "layers.{i}.attn.o_proj.{p}",
    "gpt_neox.layers.{i}.mlp.dense_h_to_4h.{p}": "layers.{i}.ffn.up_proj.{p}",
    "gpt_neox.layers.{i}.mlp.dense_4h_to_h.{p}": "layers.{i}.ffn.down_proj.{p}",
}

QWEN3_NAMES = {
    **LLAMA_NAMES,
    "model.layers.{i}.self_attn.q_norm.weight": "layers.{i}.attn.q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight": "layers.{i}.attn.k_norm.weight",
}

# OLMo 2: no norm before a sublayer; post_attention_layernorm and post_feedforward_layernorm normalize
# the sublayers' outputs, and q_norm/k_norm span all heads
OLMO2_NAMES = {
    **{hf: ours for hf, ours in QWEN3_NAMES.items() if "layernorm" not in hf},
    "model.layers.{i}.post_attention_layernorm.weight": "layers.{i}.post_attn_norm.weight",
    "model.layers.{i}.post_feedforward_layernorm.weight": "layers.{i}.post_ffn_norm.weight",
}

PHI_NAMES = {
    "model.embed_tokens.weight": "embed.weight",
    "model.final_layernorm.{p}": "final_norm.{p}",
    "lm_head.{p}": "lm_head.{p}",
    "model.layers.{i}.input_layernorm.{p}": "layers.{i}.attn_norm.{p}",  # read by attention and MLP alike
    "model.layers.{i}.self_attn.q_proj.{p}": "layers.{i}.attn.q_proj.{p}",
    "model.layers.{i}.self_attn.k_proj.{p}": "layers.{i}.attn.k_proj.{p}",
    "model.layers.{i}.self_attn.v_proj.{p}": "layers.{i}.attn.v_proj.{p}",
    "model.layers.{i}.self_attn.dense.{p}": "layers.{i}.attn.o_proj.{p}",
    "model.layers.{i}.self_attn.q_layernorm.{p}": "layers.{i}.attn.q_norm.{p}",
    "model.layers.{i}.self_attn.k_layernorm.{p}": "layers.{i}.attn.k_norm.{p}",
    "model.layers.{i}.mlp.fc1.{p}": "layers.{i}.ffn.up_proj.{p}",
    "model.layers.{i}.mlp.fc2.{p}": "layers.{i}.ffn.down_proj.{p}",
}

# ---- transforms: every supported layout → the family's classic one ---------------------------
def drop_tied_lm_head(tensors: Tensors, config: ModelConfig) -> Tensors:
    """With tied embeddings a stored ``lm_head.weight`` must be the embedding's copy. A different one
    is refused: transformers 4 would overwrite it with the embedding, transformers 5 would untie."""
    head = tensors.get("lm_head.weight")
    if not config.tie_embeddings or head is None:
        return tensors
    embeddings = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")
    embedding = next((t for name, t in tensors.items() if name.endswith(embeddings)), None)
    if embedding is None:  # from_state_dict will name what is missing
        return tensors
    if not torch.equal(head, embedding):
        raise ModelLoadError("config.json ties the embeddings but the checkpoint holds a different lm_head.weight; "
                             "set tie_word_embeddings to false to use it")
    return {name: t for name, t in tensors.items() if name != "lm_head.weight"}


def drop_rotary_buffers(tensors: Tensors, config: ModelConfig) -> Tensors:
    """Old Llama checkpoints store ``rotary_emb.inv_freq``: a buffer txviz derives from the config."""
    return {name: t for name, t in tensors.items() if not name.endswith("rotary_emb.inv_freq")}


def unfuse_experts(tensors: Tensors, config: ModelConfig) -> Tensors:
    """transformers 5 keeps Mixtral's experts as 3-D tensors, ``mlp.experts.gate_up_proj`` (E, 2F, d)
    = [w1; w3] per expert and ``mlp.experts.down_proj`` (E, d, F) = w2, router ``mlp.gate``; published
    checkpoints (and its save_pretrained) use ``block_sparse_moe.experts.{e}.w1/w2/w3``."""
    out: Tensors = {}
    for name, tensor in tensors.items():
        prefix, mlp, leaf = name.rpartition(".mlp.")
        if not mlp:
            out[name] = tensor
        elif leaf == "gate.weight":
            out[f"{prefix}.block_sparse_moe.gate.weight"] = tensor
        elif leaf in ("experts.gate_up_proj", "experts.down_proj"):
            _check_fused(name, tensor, config)
            for e, expert in enumerate(tensor.unbind(0)):
                experts = f"{prefix}.block_sparse_moe.experts.{e}"
                if leaf == "experts.down_proj":
                    out[f"{experts}.w2.weight"] = expert
                else:
                    out[f"{experts}.w1.weight"], out[f"{experts}.w3.weight"] = expert.chunk(2, dim=0)
        else:
            out[name] = tensor
    return out


def _check_fused(name: str, tensor: torch.Tensor, config: ModelConfig) -> None:
    d, f, e = config.d_model, config.ffn_hidden, config.n_experts
    expected = (e, 2 * f, d) if name.endswith("gate_up_proj") else (e, d, f)
    if tuple(tensor.shape) != expected:
        raise ModelLoadError(f"{name}: shape {tuple(tensor.shape)} does not match config.json's {expected}")


def add_transformer_prefix(tensors: Tensors, config: ModelConfig) -> Tensors:
    """The original GPT-2 checkpoints name the trunk without the ``transformer.`` prefix."""
    return {name if name.startswith(("transformer.", "lm_head.")) else f"transformer.{name}": t
            for name, t in tensors.items()}


def drop_attention_mask_buffers(tensors: Tensors, config: ModelConfig) -> Tensors:
    """Old GPT-2 checkpoints store the causal mask (``attn.bias``, ``attn.masked_bias``): not weights."""
    return {name: t for name, t in tensors.items() if not name.endswith((".attn.bias", ".attn.masked_bias"))}


def conv1d_to_linear(tensors: Tensors, config: ModelConfig) -> Tensors:
    """GPT-2's Conv1D computes x·W + b with W stored (in, out); nn.Linear stores (out, in)."""
    conv1d = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")
    return {name: t.t() if name.endswith(conv1d) else t for name, t in tensors.items()}


def split_fused_qkv(tensors: Tensors, config: ModelConfig) -> Tensors:
    """GPT-2's ``c_attn`` (3d, d) after conv1d_to_linear stacks q, k and v rows (its
    ``split(d, dim=2)``): split into the q_proj/k_proj/v_proj names the table lists."""
    out: Tensors = {}
    for name, tensor in tensors.items():
        if ".attn.c_attn." not in name:
            out[name] = tensor
            continue
        width = config.n_heads * config.head_dim
        if tensor.shape[0] != 3 * width:
            raise ModelLoadError(f"{name}: shape {tuple(tensor.shape)} does not match config.json's "
                                 f"fused q/k/v of {3 * width} rows")
        for part, chunk in zip(("q_proj", "k_proj", "v_proj"), tensor.split(width, dim=0)):
            out[name.replace(".c_attn.", f".{part}.")] = chunk
    return out


def _renamed_parts(name: str, fused: str, parts: tuple[str, ...]) -> list[str]:
    return [name.replace(f".{fused}.", f".{part}.") for part in parts]


def split_per_head_qkv(tensors: Tensors, config: ModelConfig) -> Tensors:
    """BLOOM's and GPT-NeoX's ``query_key_value`` (3·H·D rows) hold, head after head, that head's q, k
    and v rows (their ``view(…, H, 3, D)``): regroup them into q_proj, k_proj and v_proj."""
    out: Tensors = {}
    h, d = config.n_heads, config.head_dim
    for name, tensor in tensors.items():
        if ".query_key_value." not in name:
            out[name] = tensor
            continue
        if tensor.shape[0] != 3 * h * d:
            raise ModelLoadError(f"{name}: shape {tuple(tensor.shape)} does not match config.json's "
                                 f"fused q/k/v of {3 * h * d} rows")
        per_head = tensor.reshape(h, 3, d, *tensor.shape[1:])  # (H, 3, D[, d_model])
        for part, target in enumerate(_renamed_parts(name, "query_key_value", ("q_proj", "k_proj", "v_proj"))):
            out[target] = per_head[:, part].reshape(h * d, *tensor.shape[1:])
    return out


def split_stacked_qkv(tensors: Tensors, config: ModelConfig) -> Tensors:
    """MPT's ``Wqkv`` and Phi-3's ``qkv_proj`` stack all q rows, then all k rows, then all v rows."""
    out: Tensors = {}
    q_rows, kv_rows = config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    for name, tensor in tensors.items():
        fused = next((f for f in ("Wqkv", "qkv_proj") if f".{f}." in name), None)
        if fused is None:
            out[name] = tensor
            continue
        if tensor.shape[0] != q_rows + 2 * kv_rows:
            raise ModelLoadError(f"{name}: shape {tuple(tensor.shape)} does not match config.json's "
                                 f"fused q/k/v of {q_rows + 2 * kv_rows} rows")
        chunks = tensor.split((q_rows, kv_rows, kv_rows), dim=0)
        out.update(zip(_renamed_parts(name, fused, ("q_proj", "k_proj", "v_proj")), chunks))
    return out


def split_gate_up(tensors: Tensors, config: ModelConfig) -> Tensors:
    """Phi-3's ``gate_up_proj`` (2F rows) is the gate's rows, then the up projection's."""
    out: Tensors = {}
    for name, tensor in tensors.items():
        if ".gate_up_proj." not in name:
            out[name] = tensor
            continue
        if tensor.shape[0] != 2 * config.ffn_hidden:
            raise ModelLoadError(f"{name}: shape {tuple(tensor.shape)} does not match config.json's "
                                 f"fused gate/up of {2 * config.ffn_hidden} rows")
        out.update(zip(_renamed_parts(name, "gate_up_proj", ("gate_proj", "up_proj")), tensor.chunk(2, dim=0)))
    return out


def drop_neox_buffers(tensors: Tensors, config: ModelConfig) -> Tensors:
    """Old GPT-NeoX checkpoints store the causal mask and RoPE's frequencies: not weights."""
    buffers = (".attention.bias", ".attention.masked_bias", "rotary_emb.inv_freq")
    return {name: t for name, t in tensors.items() if not name.endswith(buffers)}


def fold_gemma_norms(tensors: Tensors, config: ModelConfig) -> Tensors:
    """Gemma's RMSNorm computes norm(x)·(1 + w) in fp32 (transformers' GemmaRMSNorm); store 1 + w, computed
    in fp32 as there, so the plain RMSNorm's norm(x)·w is the same product (bit-identical in fp32)."""
    norms = ("layernorm.weight", "model.norm.weight", "q_norm.weight", "k_norm.weight")
    return {name: (t.float() + 1.0).to(t.dtype) if name.endswith(norms) else t for name, t in tensors.items()}


# ---- the families -------------------------------------------------------------------------------
LAYOUTS: dict[str, tuple[tuple[Transform, ...], dict[str, str]]] = {
    "llama": ((drop_rotary_buffers, drop_tied_lm_head), LLAMA_NAMES),
    "mistral": ((drop_rotary_buffers, drop_tied_lm_head), LLAMA_NAMES),
    "qwen2": ((drop_rotary_buffers, drop_tied_lm_head), LLAMA_NAMES),
    "mixtral": ((drop_rotary_buffers, drop_tied_lm_head, unfuse_experts), MIXTRAL_NAMES),
    "gemma": ((drop_rotary_buffers, drop_tied_lm_head, fold_gemma_norms), LLAMA_NAMES),
    "gemma2": ((drop_tied_lm_head, fold_gemma_norms), GEMMA2_NAMES),
    "gemma3_text": ((drop_tied_lm_head, fold_gemma_norms), GEMMA3_NAMES),
    "gpt2": ((add_transformer_prefix, drop_attention_mask_buffers, drop_tied_lm_head, conv1d_to_linear,
              split_fused_qkv), GPT2_NAMES),
    "bloom": ((add_transformer_prefix, drop_tied_lm_head, split_per_head_qkv), BLOOM_NAMES),
    "mpt": ((drop_tied_lm_head, split_stacked_qkv), MPT_NAMES),
    "gpt_neox": ((drop_neox_buffers, drop_tied_lm_head, split_per_head_qkv), GPT_NEOX_NAMES),
    "phi3": ((drop_rotary_buffers, drop_tied_lm_head, split_stacked_qkv, split_gate_up), LLAMA_NAMES),
    "qwen3": ((drop_rotary_buffers, drop_tied_lm_head), QWEN3_NAMES),
    "olmo2": ((drop_rotary_buffers, drop_tied_lm_head), OLMO2_NAMES),
    "smollm3": ((drop_rotary_buffers, drop_tied_lm_head), LLAMA_NAMES),
    "phi": ((drop_rotary_buffers, drop_tied_lm_head), PHI_NAMES),
}
# Mixture-of-Experts families (txviz.loading.hf.families): Llama's names plus their experts'
LAYOUTS.update({
    "qwen2_moe": ((drop_rotary_buffers, drop_tied_lm_head, split_stacked_experts),
                  {**LLAMA_NAMES, **qwen2_moe.EXPERT_NAMES, **qwen2_moe.SHARED_EXPERT_NAMES}),
    "qwen3_moe": ((drop_rotary_buffers, drop_tied_lm_head, split_stacked_experts),
                  {**LLAMA_NAMES, **qwen3_moe.QK_NORM_NAMES, **qwen2_moe.EXPERT_NAMES}),
    "olmoe": ((drop_rotary_buffers, drop_tied_lm_head, split_stacked_experts),
              {**LLAMA_NAMES, **qwen3_moe.QK_NORM_NAMES, **qwen2_moe.EXPERT_NAMES}),
    "granitemoe": ((drop_rotary_buffers, drop_tied_lm_head, split_stacked_experts),
                   {**{hf: ours for hf, ours in LLAMA_NAMES.items() if ".mlp." not in hf}, **granitemoe.EXPERT_NAMES}),
})
LAYOUTS["gemma3"] = ((gemma3_multimodal.text_decoder_names, drop_tied_lm_head, fold_gemma_norms), GEMMA3_NAMES)
LAYOUTS["gpt_oss"] = ((drop_tied_lm_head, mxfp4.dequantize_experts, gpt_oss.unfuse_experts), GPT_OSS_NAMES)
# family → (tensor-name prefixes never read: the parts of a checkpoint txviz does not run, what to tell the user)
SKIPPED_PARTS: dict[str, tuple[tuple[str, ...], str]] = {
    "gemma3": (gemma3_multimodal.SKIPPED_PREFIXES, gemma3_multimodal.NOTE)}


def _compile(template: str) -> re.Pattern:
    pattern = re.escape(template)
    for key, allowed in (("i", r"\d+"), ("e", r"\d+"), ("p", "weight|bias")):
        pattern = pattern.replace(re.escape("{" + key + "}"), f"(?P<{key}>{allowed})")
    return re.compile(pattern)


def rename(tensors: Tensors, table: dict[str, str]) -> Tensors:
    """Apply a name table; a tensor no entry matches is refused, by name."""
    compiled = [(_compile(hf), ours) for hf, ours in table.items()]
    out: Tensors = {}
    unknown = []
    for name, tensor in tensors.items():
        for pattern, target in compiled:
            match = pattern.fullmatch(name)
            if match:
                out[target.format(**match.groupdict())] = tensor
                break
        else:
            unknown.append(name)
    if unknown:
        raise ModelLoadError(f"{len(unknown)} checkpoint tensors have no place in this architecture, "
                             f"e.g. {sorted(unknown)[:5]}")
    return out


def to_txviz_names(kind: str, tensors: Tensors, config: ModelConfig) -> tuple[Tensors, list[str]]:
    """The family's transforms, then its table. Returns the renamed tensors and the transforms run."""
    transforms, table = LAYOUTS[kind]
    for transform in transforms:
        tensors = transform(tensors, config)
    return rename(tensors, table), [t.__name__ for t in transforms]
