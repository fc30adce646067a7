"""Tiny, seeded, randomly initialized transformers models of every family the HF loader supports.

Built from config objects (never downloaded), in float32 with eager attention so transformers
returns its attention maps. Every parameter is re-drawn, norms and biases included (transformers
initializes them to 1 and 0, which would hide a swapped norm or a dropped bias), with a scale that
makes attention sharp enough for its maps to tell heads and positions apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import save_file

SEQ_LEN, WINDOW = 24, 8
LLAMA_BASE = dict(vocab_size=160, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5)
GPT2_BASE = dict(vocab_size=160, n_embd=64, n_layer=3, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0)
GEMMA_BASE = dict(vocab_size=160, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=1, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6)
BLOOM_BASE = dict(vocab_size=160, hidden_size=48, n_layer=2, n_head=6)  # 6 heads: the non-power-of-2 slopes
MPT_BASE = dict(vocab_size=160, d_model=48, n_layers=2, n_heads=6, max_seq_len=64)
NEOX_BASE = dict(vocab_size=160, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96,
                 max_position_embeddings=64)
PHI3_BASE = dict(vocab_size=160, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=96, max_position_embeddings=64, pad_token_id=0, bos_token_id=0, eos_token_id=0)
GEMMA_MIXED = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]
GEMMA3 = dict(sliding_window=WINDOW, query_pre_attn_scalar=24, layer_types=GEMMA_MIXED, rope_theta=5000.0,
              rope_local_base_freq=100.0)

# family → (transformers' config class, its model class, the base settings); the classes by name, so that
# importing this module does not import transformers (tests/helpers/hf_reference.py)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", LLAMA_BASE),
    "mistral": ("MistralConfig", "MistralForCausalLM", LLAMA_BASE),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", LLAMA_BASE),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", LLAMA_BASE),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", GPT2_BASE),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", GEMMA_BASE),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", GEMMA_BASE),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", GEMMA_BASE),
    "bloom": ("BloomConfig", "BloomForCausalLM", BLOOM_BASE),
    "mpt": ("MptConfig", "MptForCausalLM", MPT_BASE),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", NEOX_BASE),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", PHI3_BASE),
}

# variant → (family, config overrides)
VARIANTS: dict[str, tuple[str, dict]] = {
    "llama_gqa": ("llama", dict(num_key_value_heads=2)),
    "llama_mqa": ("llama", dict(num_key_value_heads=1)),
    "llama_mha": ("llama", dict(num_key_value_heads=4)),
    "llama_biases": ("llama", dict(attention_bias=True, mlp_bias=True)),
    "llama_head_dim_32": ("llama", dict(head_dim=32)),
    "llama_tied": ("llama", dict(tie_word_embeddings=True)),
    "llama_rope_linear": ("llama", dict(rope_scaling={"rope_type": "linear", "factor": 4.0})),
    "llama_rope_dynamic": ("llama", dict(rope_scaling={"rope_type": "dynamic", "factor": 4.0})),
    "llama_rope_llama3": ("llama", dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 16})),
    "llama_rope_yarn": ("llama", dict(rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                    "original_max_position_embeddings": 16})),
    "llama_theta_500k": ("llama", dict(rope_theta=500000.0)),
    "mistral_window": ("mistral", dict(sliding_window=WINDOW)),
    "mistral_no_window": ("mistral", dict(sliding_window=None)),
    "qwen2": ("qwen2", dict()),
    "qwen2_window": ("qwen2", dict(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0)),
    "qwen2_tied": ("qwen2", dict(tie_word_embeddings=True)),
    "mixtral": ("mixtral", dict(num_local_experts=4, num_experts_per_tok=2)),
    "mixtral_window": ("mixtral", dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW)),
    "gpt2": ("gpt2", dict()),
    "gpt2_untied_gelu": ("gpt2", dict(tie_word_embeddings=False, activation_function="gelu", n_inner=80)),
    # Gemma 1/2/3: MQA or GQA, soft-caps, per-layer kinds with their own RoPE bases
    "gemma_mqa": ("gemma", dict()),
    "gemma_gqa_untied": ("gemma", dict(num_key_value_heads=2, tie_word_embeddings=False)),
    "gemma2_softcaps": ("gemma2", dict(sliding_window=WINDOW, query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
                                       final_logit_softcapping=3.0)),
    "gemma3_mixed_rope": ("gemma3", GEMMA3),
    "gemma3_scaled_global_rope": ("gemma3", dict(GEMMA3, rope_scaling={"rope_type": "linear", "factor": 4.0},
                                                 final_logit_softcapping=3.0)),
    # BLOOM and MPT (ALiBi), GPT-NeoX (the parallel block, partial rotary), Phi-3 (fused q/k/v)
    "bloom": ("bloom", dict()),
    "bloom_8_heads_untied": ("bloom", dict(n_head=8, tie_word_embeddings=False)),
    "mpt": ("mpt", dict()),
    "mpt_4_heads": ("mpt", dict(n_heads=4)),
    "gpt_neox_parallel": ("gpt_neox", dict()),
    "gpt_neox_sequential": ("gpt_neox", dict(use_parallel_residual=False)),
    "gpt_neox_full_rotary_no_bias": ("gpt_neox", dict(rotary_pct=1.0, attention_bias=False, tie_word_embeddings=True)),
    "gpt_neox_half_rotary_gelu_new": ("gpt_neox", dict(rotary_pct=0.5, hidden_act="gelu_new")),
    "phi3": ("phi3", dict()),
    "phi3_partial_window": ("phi3", dict(partial_rotary_factor=0.75, sliding_window=WINDOW)),
}
SLIDING = {"mistral_window", "qwen2_window", "mixtral_window"}


def variants_of(*families: str) -> list[str]:
    """The names of ``VARIANTS`` rows of these families, sorted."""
    return sorted(name for name, (family, _) in VARIANTS.items() if family in families)


def randomize_(model: torch.nn.Module, seed: int, scale: float = 0.15) -> torch.nn.Module:
    """Redraw every parameter: norm weights around 1, everything else around 0."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            is_norm_weight = param.dim() == 1 and name.endswith("weight")
            param.copy_(1 + 0.2 * noise if is_norm_weight else scale * noise)
    return model


def build(variant: str, seed: int = 0, scale: float = 0.15) -> torch.nn.Module:
    """The transformers model of ``variant``: float32, eager attention, eval mode, every parameter redrawn
    (``randomize_``'s ``scale``)."""
    import transformers

    family, overrides = VARIANTS[variant]
    config_name, model_name, base = FAMILIES[family]
    config = getattr(transformers, config_name)(**{**base, **overrides}, attn_implementation="eager")
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).to(torch.float32)
    return randomize_(model, seed, scale).eval()


def random_ids(vocab_size: int, batch: int = 2, seq_len: int = SEQ_LEN, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab_size, (batch, seq_len), generator=torch.Generator().manual_seed(seed))


def save(model: torch.nn.Module, directory: Path, **kwargs) -> Path:
    """transformers' own save_pretrained, safetensors (sharded with ``max_shard_size``)."""
    model.save_pretrained(directory, safe_serialization=True, **kwargs)
    return directory


def save_state_dict(model: torch.nn.Module, directory: Path) -> Path:
    """The in-memory names and layout, as they are (for Mixtral in transformers 5: fused experts)."""
    model.config.save_pretrained(directory)
    tensors = {name: t.detach().clone().contiguous() for name, t in model.state_dict().items()}
    save_file(tensors, str(Path(directory) / "model.safetensors"), metadata={"format": "pt"})
    return directory


def edit_config(directory: Path, edit: Callable[[dict], dict]) -> None:
    path = Path(directory) / "config.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def legacy_rope_spelling(config: dict) -> dict:
    """transformers 4.x's spelling: top-level rope_theta and a rope_scaling dict keyed ``type``."""
    params = dict(config.pop("rope_parameters"))
    config["rope_theta"] = params.pop("rope_theta")
    kind = params.pop("rope_type")
    config["rope_scaling"] = None if kind == "default" else {"type": kind, **params}
    return config


def save_llama_with_tokenizer(directory: Path, seed: int = 0) -> Path:
    """A tiny llama checkpoint with a real byte-level tokenizer.json (what the app's pages need to feed it text)."""
    import transformers

    from tests.helpers.byte_tokenizer import ByteLevelTokenizer

    tokenizer = ByteLevelTokenizer()
    config = transformers.LlamaConfig(**{**LLAMA_BASE, "vocab_size": tokenizer.vocab_size}, attn_implementation="eager")
    torch.manual_seed(seed)
    save(randomize_(transformers.LlamaForCausalLM(config), seed), directory)
    tokenizer._tokenizer.save(str(Path(directory) / "tokenizer.json"))
    return directory
