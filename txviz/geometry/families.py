"""What each Hugging Face model family's decoder holds, as plain data (one ``Traits`` per model_type),
written after the family's transformers modelling file: the norms and how many per layer, which
projections have biases (and the config key that switches them), a gated or plain MLP, query/key
norms, learned positions, a bias on the output head, whether embeddings are tied by default, and the
rule that says which layers keep a sliding window. The reader (txviz.geometry.read) turns a config
and these traits into a Geometry; DeepSeek's latent attention has its own reader (txviz.geometry.mla).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

WindowRule = Literal["none", "all", "listed", "qwen2", "qwen2_moe", "qwen3_moe", "gemma2", "gemma3", "cohere2",
                     "smollm3", "llama4"]
MoeRule = Literal["none", "mixtral", "qwen_moe", "llama4"]


@dataclass(frozen=True)
class Traits:
    norm: str = "rms"  # txviz.geometry.params.NORM_PARAMS
    norms_per_layer: int = 2
    # per head_dim (Qwen3, Gemma 3) | over all heads (OLMo 2) | without weights (Llama 4's L2 norm)
    qk_norm: Literal["none", "head", "full", "weightless"] = "none"
    qkv_bias: tuple[str | None, bool] = ("attention_bias", False)  # (config key, default)
    out_bias: bool = True  # the output projection follows qkv_bias (False: never biased, Qwen2)
    mlp_bias: tuple[str | None, bool] = ("mlp_bias", False)
    gated: bool = True  # gate, up, down (SwiGLU/GeGLU) | up, down
    ffn_default_mult: int | None = None  # FFN width when the config gives none: this × hidden_size
    learned_positions: bool = False
    embedding_norm: bool = False  # a norm right after the embeddings (BLOOM)
    lm_head_bias: bool = False
    tied_default: bool = False  # the family's config class default for tie_word_embeddings
    windows: WindowRule = "none"
    moe: MoeRule = "none"
    gqa: bool = True  # the family reads num_key_value_heads (GPT-2, GPT-NeoX, GPT-J and BLOOM have one per head)
    rope_on_sliding_only: bool = False  # full-attention layers have no positions (Cohere 2)
    attention_sinks: bool = False  # one learned sink logit per query head and layer (gpt-oss)
    router_bias: bool = False  # the router's linear layer has a bias (gpt-oss)


LLAMA = Traits()
GPT_LIKE = dict(norm="layernorm", qkv_bias=(None, True), mlp_bias=(None, True), gated=False, ffn_default_mult=4,
                gqa=False)

TRAITS: dict[str, Traits] = {
    "llama": LLAMA,
    "mistral": Traits(windows="all"),
    "mixtral": Traits(windows="all", moe="mixtral"),
    "qwen2": Traits(qkv_bias=(None, True), out_bias=False, windows="qwen2"),
    "qwen2_moe": Traits(qkv_bias=("qkv_bias", True), out_bias=False, windows="qwen2_moe", moe="qwen_moe"),
    "qwen3": Traits(qk_norm="head", windows="qwen2"),
    "qwen3_moe": Traits(qk_norm="head", windows="qwen3_moe", moe="qwen_moe"),
    "gemma": Traits(tied_default=True),
    "gemma2": Traits(norms_per_layer=4, tied_default=True, windows="gemma2"),
    "gemma3_text": Traits(norms_per_layer=4, qk_norm="head", tied_default=True, windows="gemma3"),
    "phi": Traits(**{**GPT_LIKE, "norms_per_layer": 1, "gqa": True}, lm_head_bias=True),
    "phi3": Traits(windows="all"),
    "falcon": Traits(norm="layernorm", qkv_bias=("bias", False), mlp_bias=("bias", False), gated=False,
                     ffn_default_mult=4, tied_default=True),  # norms per layer: txviz.geometry.read
    "gpt2": Traits(**GPT_LIKE, learned_positions=True, tied_default=True),
    "gpt_neox": Traits(**{**GPT_LIKE, "qkv_bias": ("attention_bias", True)}),
    "gptj": Traits(**{**GPT_LIKE, "qkv_bias": (None, False), "norms_per_layer": 1}, lm_head_bias=True),
    "bloom": Traits(**GPT_LIKE, embedding_norm=True, tied_default=True),
    "mpt": Traits(norm="layernorm_nobias", qkv_bias=(None, False), mlp_bias=(None, False), gated=False,
                  tied_default=True),  # FFN width: expansion_ratio × d_model
    "olmo": Traits(norm="none"),  # OLMo's LayerNorm has no parameters
    "olmo2": Traits(qk_norm="full"),  # post-attention and post-feedforward RMSNorms only
    "starcoder2": Traits(norm="layernorm", qkv_bias=("use_bias", True), mlp_bias=("use_bias", True), gated=False,
                         tied_default=True, windows="all"),
    "cohere": Traits(norm="layernorm_nobias", norms_per_layer=1, tied_default=True),  # qk norm: use_qk_norm
    # gpt-oss: biased experts and routers, windows per layer_types (else every other layer, as Gemma 2), a sink
    # logit per query head
    "gpt_oss": Traits(mlp_bias=(None, True), windows="gemma2", moe="mixtral", attention_sinks=True, router_bias=True),
    # Command R7B: Cohere's parallel block; 3 sliding layers with RoPE, then one global layer without positions
    "cohere2": Traits(norm="layernorm_nobias", norms_per_layer=1, tied_default=True, windows="cohere2",
                      rope_on_sliding_only=True),
    "smollm3": Traits(tied_default=True, windows="smollm3"),  # every 4th layer without RoPE
    # Llama 4: chunked attention on its RoPE layers, global attention without positions on every 4th;
    # routed experts plus one shared expert on the MoE layers, dense MLPs of intermediate_size_mlp elsewhere
    "llama4_text": Traits(qk_norm="weightless", windows="llama4", moe="llama4"),
    # OLMoE: OLMo 2's query/key norms over all heads, routed experts as wide as intermediate_size, no shared one
    "olmoe": Traits(qk_norm="full", moe="mixtral"),
    # Granite-MoE: a Llama with routed experts; its multipliers scale activations, not sizes
    "granitemoe": Traits(moe="mixtral"),
}

# Other names the same families go by in published configs.
# Kimi K2 publishes DeepSeek-V3's architecture under its own model_type.
TYPE_ALIASES = {"RefinedWebModel": "falcon", "RefinedWeb": "falcon", "gemma3": "gemma3_text", "kimi_k2": "deepseek_v3"}
MLA_TYPES = ("deepseek_v2", "deepseek_v3")
HYBRID_TYPES = ("jamba", "qwen3_next", "granitemoehybrid")  # layers that keep a state instead of K and V (txviz.geometry.hybrid)
KNOWN_TYPES = tuple(TRAITS) + MLA_TYPES + HYBRID_TYPES

# transformers' config-class defaults, for the families whose published configs leave numbers out
# (Gemma 3's multimodal checkpoints nest a text_config that gives only what differs from these;
# Falcon's configs leave out the context).
CONFIG_DEFAULTS: dict[str, dict] = {
    "falcon": {"max_position_embeddings": 2048},
    "gemma3_text": {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
                    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131_072, "sliding_window": 4096, "sliding_window_pattern": 6},
    "llama4_text": {"attention_chunk_size": 8192},
}
