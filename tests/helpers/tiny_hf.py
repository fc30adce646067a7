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

# family → (transformers' config class, its model class, the base settings); the classes by name, so that
# importing this module does not import transformers (tests/helpers/hf_reference.py)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", LLAMA_BASE),
    "mistral": ("MistralConfig", "MistralForCausalLM", LLAMA_BASE),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", LLAMA_BASE),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", LLAMA_BASE),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", GPT2_BASE),
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
}
SLIDING = {"mistral_window", "qwen2_window", "mixtral_window"}


def randomize_(model: torch.nn.Module, seed: int, scale: float = 0.15) -> torch.nn.Module:
    """Redraw every parameter: norm weights around 1, everything else around 0."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            is_norm_weight = param.dim() == 1 and name.endswith("weight")
            param.copy_(1 + 0.2 * noise if is_norm_weight else scale * noise)
    return model


def build(variant: str, seed: int = 0) -> torch.nn.Module:
    """The transformers model of ``variant``: float32, eager attention, eval mode."""
    import transformers

    family, overrides = VARIANTS[variant]
    config_name, model_name, base = FAMILIES[family]
    config = getattr(transformers, config_name)(**{**base, **overrides}, attn_implementation="eager")
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).to(torch.float32)
    return randomize_(model, seed).eval()


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
