"""``Geometry``: what a causal LM's config.json says about its size, read without building the model
(txviz.geometry.read_geometry). Per layer: KV heads, head size and sliding window; for multi-head latent
attention (MLA, DeepSeek-AI 2024) the cached latent and RoPE key widths; for a mixture of experts the
experts held and those a token runs; parameters counted from the shapes of the family's modules.

Each layer has a type, as transformers' ``layer_types`` names them: ``full_attention`` keeps every token,
``sliding_attention`` the last ``sliding_window`` (Mistral, Gemma 2/3, gpt-oss, Cohere 2),
``chunked_attention`` at most ``attention_chunk_size`` (Llama 4: a token attends within its chunk), and
``linear_attention`` / ``mamba`` keep no K/V at all but a fixed state per sequence (Qwen3-Next's gated
DeltaNet, Jamba's Mamba layers), counted in ``state_elements``. Layers without positions beside RoPE
layers (Llama 4, SmolLM3, Cohere 2) change no byte but are listed in ``positionless``.
Bytes and FLOPs are computed from it by txviz.analysis.kv.memory, once it is a
``txviz.analysis.kv.memory_model.MemoryModel`` (``MemoryModel.from_geometry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["MHA", "GQA", "MQA", "MLA"]
FULL, SLIDING, CHUNKED = "full_attention", "sliding_attention", "chunked_attention"
NO_KV_TYPES = ("linear_attention", "mamba")  # layers that keep a fixed state instead of K and V
LAYER_TYPES = (FULL, SLIDING, CHUNKED) + NO_KV_TYPES


@dataclass(frozen=True)
class Geometry:
    model_type: str
    architecture: str
    n_layers: int
    d_model: int
    vocab_size: int
    n_heads: int
    kv_heads: tuple[int, ...]  # per layer; for MLA the heads after the latent is expanded
    head_dims: tuple[int, ...]  # per layer: width of one K (and V) head; MLA: the value head
    windows: tuple[int | None, ...]  # per layer: tokens kept (None: all)
    n_params: int
    active_params: int  # per token: a MoE counts its router, top-k and shared experts
    unmultiplied_params: int  # no matmul FLOPs: looked-up tables (untied input embeddings, positions), norms, biases
    ffn_width: int  # FFN hidden width one token runs through (a MoE: its active and shared experts')
    tied_embeddings: bool
    max_context: int | None = None
    latent_dim: int = 0  # MLA: kv_lora_rank, cached per token per layer
    rope_dim: int = 0  # MLA: qk_rope_head_dim, the one RoPE key cached beside the latent
    qk_head_dim: int = 0  # width of a query·key product per head (0: the head dim)
    n_experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    shared_experts: int = 0  # experts every token runs besides the routed ones (DeepSeek, Qwen2-MoE)
    moe_layers: int = 0
    kv_bias: bool = False  # K and V projections carry biases (a what-if with more KV heads adds them too)
    # parameters per group (txviz.geometry.params.GROUPS), summing to n_params: what a quantization scheme covers
    param_groups: tuple[tuple[str, int], ...] = field(default=(), compare=False)
    weight_format: object = field(default=None, compare=False)  # the published quantization (txviz.geometry.quantization)
    assumptions: tuple[str, ...] = field(default=(), compare=False)  # what a generic reading assumed
    notes: tuple[str, ...] = field(default=(), compare=False)  # what is left out (a vision tower...)
    layer_types: tuple[str, ...] = ()  # per layer, one of LAYER_TYPES; (): sliding where a window is, else full
    state_elements: tuple[int, ...] = ()  # per layer: fixed state per sequence (NO_KV_TYPES); (): none
    positionless: tuple[int, ...] = ()  # layers without position encoding beside RoPE layers (NoPE)
    attention_sinks: int = 0  # learned sink logits per attention layer (gpt-oss): parameters, no KV
    ignored: tuple[str, ...] = field(default=(), compare=False)  # config keys no reader understood (warnings)

    def __post_init__(self) -> None:
        if not self.layer_types:
            object.__setattr__(self, "layer_types", tuple(FULL if w is None else SLIDING for w in self.windows))
        if not self.state_elements:
            object.__setattr__(self, "state_elements", (0,) * self.n_layers)
        for name in ("kv_heads", "head_dims", "windows", "layer_types", "state_elements"):
            if len(getattr(self, name)) != self.n_layers:
                raise ValueError(f"{name} must have one entry per layer ({self.n_layers})")
        if not set(self.layer_types) <= set(LAYER_TYPES):
            raise ValueError(f"layer_types must be among {', '.join(LAYER_TYPES)}")

    @property
    def kind(self) -> Kind:
        if self.latent_dim:
            return "MLA"
        if all(k == self.n_heads for k in self.kv_heads):
            return "MHA"
        return "MQA" if all(k == 1 for k in self.kv_heads) else "GQA"

    def kv_elements(self, layer: int) -> int:
        """Elements one token adds to ``layer``'s cache: K and V of each KV head, or MLA's latent + key."""
        if self.layer_types[layer] in NO_KV_TYPES:
            return 0
        if self.latent_dim:
            return self.latent_dim + self.rope_dim
        return 2 * self.kv_heads[layer] * self.head_dims[layer]

    def kv_elements_per_token(self) -> int:
        return sum(self.kv_elements(layer) for layer in range(self.n_layers))

    def kv_elements_for(self, tokens: int) -> int:
        """Elements the cache holds for ``tokens`` tokens of one sequence (windows keep their last W)."""
        return sum(self.kv_elements(i) * min(tokens, w or tokens) for i, w in enumerate(self.windows))

    @property
    def window_sizes(self) -> set[int]:
        return {w for w in self.windows if w is not None}
