"""ModelConfig: every architectural choice of a decoder-only transformer, in one frozen dataclass.

One config describes Llama, Mistral, Qwen2, Mixtral, GPT-2, SmolLM2, Gemma 1/2/3, BLOOM, MPT, GPT-NeoX,
Phi-3, Qwen3, OLMo 2, SmolLM3, Phi-1/2, Qwen2/3-MoE, OLMoE, Granite-MoE and the lab's tiny variants.
The choices follow the tutorial's: attention heads and KV sharing, pre-norm blocks with RMSNorm or
LayerNorm and a SwiGLU, GeGLU or GELU FFN, positions, dense or Mixture-of-Experts FFN. Derived fields
are filled in ``__post_init__``;
bad combinations raise ``ConfigError`` with a message that says what to change.

Gemma's pieces are plain options, never a model name: per-layer attention kinds (``layer_types``, each
layer "full" or "sliding" over ``sliding_window``) with their own RoPE base (``rope_local_theta``),
QK-norm, the post-norms of Gemma 2/3 (``sandwich_norm``), GeGLU, an embedding scale, a query scale
(``query_pre_attn_scalar``) and tanh soft-capping of scores and logits (Gemma 2). Gemma's RMSNorm
computes x·rsqrt(mean x²+eps)·(1 + w): the loaders fold the 1 into the weight at LOAD time (HF weights
get +1 in fp32; GGUF files already store w + 1), so the decoder's one RMSNorm stays x·rsqrt(…)·w.

BLOOM, MPT and GPT-NeoX are options too: a norm right after the embedding (``embed_norm``, BLOOM),
LayerNorm without a bias (``norm_bias``, MPT), ALiBi slopes 2^(−max·h/n) with ``alibi_bias_max`` (8 in
the paper and BLOOM; MPT makes it a setting), RoPE on only the first ``rotary_dims`` of each head
(GPT-NeoX, Phi), and the parallel block x + Attn(Norm₁(x)) + FFN(Norm₂(x)) (``parallel_block``,
GPT-NeoX's use_parallel_residual). Fused q/k/v weights are split by the loaders.

OLMo 2, Qwen3, SmolLM3 and Phi-1/2 add: only post-norms (``pre_norm`` off with ``sandwich_norm``, OLMo 2),
QK-norm over all heads at once (``qk_norm_scope``, OLMo 2) or as a LayerNorm (Phi), layers that skip RoPE
(``layer_rope``, SmolLM3's NoPE layers), one norm read by both sublayers of a parallel block
(``shared_block_norm``, Phi-1/2) and a bias on the unembedding (``lm_head_bias``, Phi-1/2).

Mixture-of-Experts models choose their router the same way (txviz.model.router): softmax over all
experts then top-k, or top-k logits then a softmax over them (``router_order``), renormalised gates or
not (``router_norm``), a router bias; routed experts of their own width (``expert_hidden``), a shared
expert every token runs through with or without a sigmoid gate (Qwen-MoE), and layers kept dense
(``dense_layers``). Granite's fixed multipliers are options too (``residual_scale``, ``logit_divisor``).
"""

from __future__ import annotations

import functools
import math
import typing

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Norm = Literal["rmsnorm", "layernorm"]
FFN = Literal["swiglu", "geglu", "gelu_mlp", "swiglu_clamped"]  # geglu: gated like swiglu, gelu (gelu_approximate) gate
LayerType = Literal["full", "sliding"]
LAYER_TYPES: tuple[str, ...] = typing.get_args(LayerType)
Positions = Literal["rope", "alibi", "learned", "none"]
RopeScalingKind = Literal["none", "linear", "ntk", "yarn", "llama3"]
RouterNorm = Literal["topk", "all"]
RouterOrder = Literal["softmax_topk", "topk_softmax"]  # txviz.model.router


class ConfigError(ValueError):
    """A ModelConfig that cannot describe a working model."""


# Bounds no real decoder comes near (the largest today: 126 layers, 256 experts, head_dim 256, a 262k
# vocabulary, 10M context). A model file's numbers size tensors, tables and per-layer lists, so they are
# checked against these before anything is built from them: 10⁹ layers in a 126 KB file is an attack.
SIZE_BOUNDS = {"n_layers": 1024, "n_heads": 4096, "n_kv_heads": 4096, "head_dim": 16384, "d_model": 1 << 18,
               "ffn_hidden": 1 << 20, "vocab_size": 1 << 22, "max_seq_len": 1 << 27, "n_experts": 4096,
               "top_k": 4096}


def check_bound(name: str, value: int) -> int:
    """``value`` if it is within ``SIZE_BOUNDS[name]``, else ConfigError naming the field and the bound."""
    bound = SIZE_BOUNDS[name]
    if isinstance(value, int) and value > bound:
        raise ConfigError(f"{name}={value:,} is beyond any real model (at most {bound:,} here): "
                          "the file's numbers are wrong or hostile")
    return value


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict:
    return typing.get_type_hints(cls)


def _check_field_types(config) -> None:
    """Every field holds what its annotation says: a Literal one of its choices, a bool a bool, a float
    a real number, an ``int | None`` an int or None (configs come from JSON files: "4", [1], 1.5)."""
    for name, hint in _type_hints(type(config)).items():
        value, args = getattr(config, name), typing.get_args(hint)
        if typing.get_origin(hint) is Literal:
            ok = isinstance(value, str) and value in args
        elif hint is bool:
            ok = isinstance(value, bool)
        elif hint is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif hint is str:
            ok = isinstance(value, str)
        elif args and set(args) == {int, type(None)}:
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        elif args and set(args) == {float, type(None)}:
            ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
        else:
            continue  # plain ints are checked for positivity by the caller; nested dataclasses by their own
        if not ok:
            expected = f"one of {list(args)}" if typing.get_origin(hint) is Literal else getattr(hint, "__name__", str(hint))
            raise ConfigError(f"{name} must be {expected}, got {str(value)[:80]!r}")


@dataclass(frozen=True)
class RopeScaling:
    """How RoPE frequencies are stretched for contexts longer than training.

    ``linear``: position interpolation, every frequency divided by ``factor`` (Chen et al. 2023).
    ``ntk``: NTK-aware, the base raised to theta·factor^(d/(d-2)) (bloc97 2023).
    ``yarn``: per-frequency blend of interpolation and extrapolation plus an attention temperature
    (Peng et al. 2023). ``llama3``: low frequencies divided by ``factor``, high ones kept, a smooth
    ramp between (Meta, Llama 3.1).
    """

    kind: RopeScalingKind = "none"
    factor: float = 1.0
    original_max_seq_len: int | None = None
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    beta_fast: float = 32.0  # yarn
    beta_slow: float = 1.0  # yarn
    truncate: bool = True  # yarn: the ramp's ends rounded to whole pairs (False in gpt-oss)

    def __post_init__(self) -> None:
        _check_field_types(self)
        if self.kind != "none" and not (math.isfinite(self.factor) and self.factor > 0):
            raise ConfigError(f"rope scaling factor must be > 0, got {self.factor}")
        if self.kind in ("yarn", "llama3") and not self.original_max_seq_len:
            raise ConfigError(f"rope scaling '{self.kind}' needs original_max_seq_len")
        # the formulas divide by these and take their logarithms: refused here, not as ZeroDivisionError later
        if self.kind == "yarn" and not all(math.isfinite(b) and 1e-3 <= b <= 1e6 for b in (self.beta_fast, self.beta_slow)):
            raise ConfigError(f"yarn's beta_fast and beta_slow must be between 0.001 and 1e6, got "
                              f"{self.beta_fast} and {self.beta_slow}")
        if self.kind == "llama3" and not (0 < self.low_freq_factor < self.high_freq_factor
                                          and math.isfinite(self.high_freq_factor)):
            raise ConfigError(f"llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor, got "
                              f"{self.low_freq_factor} and {self.high_freq_factor}")


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer. ``n_kv_heads`` = ``n_heads`` is MHA, 1 is MQA, between is GQA."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    ffn_hidden: int
    n_kv_heads: int | None = None  # None: same as n_heads (MHA)
    head_dim: int | None = None  # None: d_model // n_heads
    norm: Norm = "rmsnorm"
    norm_eps: float = 1e-5
    ffn: FFN = "swiglu"
    gelu_approximate: Literal["none", "tanh"] = "tanh"  # GPT-2's "gelu_new" is the tanh form
    n_experts: int = 0  # 0: dense FFN; >0: Mixture of Experts
    top_k: int = 2
    router_norm: RouterNorm = "topk"  # topk: gates renormalized over the chosen experts (Mixtral)
    router_order: RouterOrder = "softmax_topk"  # topk_softmax: top-k logits, softmax over them (Granite)
    router_bias: bool = False  # the router's linear map has a bias (gpt-oss)
    expert_hidden: int | None = None  # each routed expert's width; None: ffn_hidden
    shared_expert_hidden: int = 0  # an always-on expert outside the top-k, this wide (Qwen-MoE); 0: none
    shared_expert_gate: bool = False  # the shared expert's output scaled by sigmoid(x·w) (Qwen-MoE)
    dense_layers: tuple[int, ...] = ()  # layers of a MoE model with a dense FFN ffn_hidden wide (Qwen-MoE)
    positions: Positions = "rope"
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    max_seq_len: int = 2048
    sliding_window: int | None = None
    tie_embeddings: bool = False
    qkv_bias: bool = False
    out_bias: bool = False  # attention output projection
    mlp_bias: bool = False
    # Per-layer attention kind, "full" or "sliding" (over sliding_window). None: every layer slides when
    # sliding_window is set, else every layer is full (Mistral). Gemma 2 alternates; Gemma 3 has 5:1.
    layer_types: tuple[str, ...] | None = None
    rope_local_theta: float | None = None  # RoPE base on sliding layers (Gemma 3: 1e4); None: rope_theta
    qk_norm: bool = False  # the config's norm on q and k, before RoPE (Gemma 3, Qwen3: RMSNorm; Phi-1/2: LayerNorm)
    qk_norm_scope: Literal["head", "all_heads"] = "head"  # over each head's D, or over all heads' H·D at once (OLMo 2)
    sandwich_norm: bool = False  # Gemma 2/3: h = x + post_norm(attn(norm(x))), the same around the FFN
    embed_scale: float = 1.0  # embeddings multiplied by it (Gemma: sqrt(d_model), rounded to the dtype)
    query_scale: float | None = None  # the scores' multiplier; None: head_dim**-0.5
    attn_softcap: float | None = None  # scores -> c·tanh(scores/c) before the mask (Gemma 2)
    final_softcap: float | None = None  # logits -> c·tanh(logits/c) (Gemma 2)
    parallel_block: bool = False  # y = x + Attn(attn_norm(x)) + FFN(ffn_norm(x)) (GPT-NeoX, use_parallel_residual)
    rotary_dims: int | None = None  # RoPE on the first rotary_dims of each head, rotate-half within them; None: all
    embed_norm: bool = False  # the config's norm on the embeddings before the first block (BLOOM)
    norm_bias: bool = True  # LayerNorm with a bias (MPT's has none); RMSNorm never has one
    alibi_bias_max: float = 8.0  # ALiBi slopes 2^(-alibi_bias_max·h/n), h = 1..n (Press et al.: 8; MPT's setting)
    pre_norm: bool = True  # a norm before each sublayer; False with sandwich_norm: only the post-norms (OLMo 2)
    layer_rope: tuple[bool, ...] | None = None  # per layer, RoPE on q and k or not (SmolLM3's NoPE layers); None: all
    shared_block_norm: bool = False  # the parallel block's attention and FFN read one norm (Phi-1/2, GPT-J)
    lm_head_bias: bool = False  # a bias on the unembedding (Phi-1/2)
    residual_scale: float = 1.0  # each sublayer's output times this before it joins the residual (Granite)
    logit_divisor: float = 1.0  # logits divided by it (Granite's logits_scaling)
    attn_sinks: bool = False  # a learned logit per head in each softmax's denominator (gpt-oss; txviz.model.sinks)
    swiglu_alpha: float = 1.702  # swiglu_clamped: the gate's sigmoid gain (txviz.model.clamped_swiglu)
    swiglu_limit: float = 7.0  # swiglu_clamped: the bound of the gate (above) and the up branch (both sides)
    name: str = "model"  # shown in the UI; never branched on
    source: str = ""  # where the numbers came from (a path, a preset's citation)

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads"):  # checked first: head_dim divides by them
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ConfigError(
                    f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                    "set head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        if isinstance(self.rope_scaling, dict):
            unknown = set(self.rope_scaling) - {f.name for f in dataclasses.fields(RopeScaling)}
            if unknown:
                raise ConfigError(f"unknown rope_scaling fields: {sorted(unknown)}")
            object.__setattr__(self, "rope_scaling", RopeScaling(**self.rope_scaling))
        for name in ("layer_types", "layer_rope", "dense_layers"):
            if isinstance(getattr(self, name), list):  # JSON has no tuples
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if not isinstance(self.rope_scaling, RopeScaling):
            raise ConfigError(f"rope_scaling must be a RopeScaling or a dict, got {self.rope_scaling!r:.80}")
        _check_field_types(self)
        self._check()

    def _check(self) -> None:
        positive = ("vocab_size", "d_model", "n_layers", "n_heads", "ffn_hidden", "n_kv_heads",
                    "head_dim", "max_seq_len")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in SIZE_BOUNDS:
            check_bound(name, getattr(self, name))
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}: "
                "each KV head must serve a whole group of query heads (GQA)"
            )
        if self.n_experts < 0:
            raise ConfigError(f"n_experts must be >= 0, got {self.n_experts}")
        if self.n_experts and not 1 <= self.top_k <= self.n_experts:
            raise ConfigError(f"top_k={self.top_k} must be between 1 and n_experts={self.n_experts}")
        if self.positions == "rope" and self.head_dim % 2:
            raise ConfigError(f"RoPE rotates pairs of dimensions: head_dim={self.head_dim} must be even")
        if not (math.isfinite(self.rope_theta) and self.rope_theta > 0):  # NaN fails every comparison
            raise ConfigError(f"rope_theta must be > 0, got {self.rope_theta}")
        if self.positions == "rope" and self.rope_scaling.kind in ("ntk", "yarn") and self.rope_theta <= 1:
            raise ConfigError(f"{self.rope_scaling.kind} scaling takes the logarithm of rope_theta: it must be > 1, "
                              f"got {self.rope_theta}")
        if self.positions == "rope" and self.rope_scaling.kind == "ntk" and self.rope_dims <= 2:
            raise ConfigError(f"ntk scaling needs more than 2 rotated dimensions, got {self.rope_dims}")
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise ConfigError(f"sliding_window must be positive or None, got {self.sliding_window}")
        if not (math.isfinite(self.norm_eps) and self.norm_eps > 0):
            raise ConfigError(f"norm_eps must be > 0, got {self.norm_eps}")
        if self.rotary_dims is not None and not (0 < self.rotary_dims <= self.head_dim and self.rotary_dims % 2 == 0):
            raise ConfigError(f"rotary_dims={self.rotary_dims} must be even and between 2 and head_dim={self.head_dim}")
        for name in ("rope_local_theta", "query_scale", "attn_softcap", "final_softcap", "embed_scale",
                     "alibi_bias_max", "residual_scale", "logit_divisor", "swiglu_alpha", "swiglu_limit"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be > 0 (or None where allowed), got {value}")
        self._check_layer_types()
        self._check_layer_rope()
        self._check_experts()
        if self.lm_head_bias and self.tie_embeddings:
            raise ConfigError("lm_head_bias needs an untied lm_head: tied embeddings have no head of their own")
        if self.shared_block_norm and not self.parallel_block:
            raise ConfigError("shared_block_norm needs parallel_block: only a parallel block's two sublayers can "
                              "read one norm")

    def _check_layer_rope(self) -> None:
        if self.layer_rope is None:
            return
        if not isinstance(self.layer_rope, tuple) or not all(isinstance(r, bool) for r in self.layer_rope):
            raise ConfigError(f"layer_rope must be a list of true/false, one per layer, got {self.layer_rope!r:.80}")
        if len(self.layer_rope) != self.n_layers:
            raise ConfigError(f"layer_rope has {len(self.layer_rope)} entries but n_layers={self.n_layers}")
        if self.positions != "rope":
            raise ConfigError(f"layer_rope says which layers RoPE rotates, but positions={self.positions!r}")

    def _check_experts(self) -> None:
        bound = SIZE_BOUNDS["ffn_hidden"]
        for name, low in (("expert_hidden", 1), ("shared_expert_hidden", 0)):
            value = getattr(self, name)
            whole = isinstance(value, int) and not isinstance(value, bool)
            if value is not None and not (whole and low <= value <= bound):
                raise ConfigError(f"{name} must be an integer from {low} to {bound:,}, got {value!r}")
        if self.router_order == "topk_softmax" and self.router_norm != "topk":
            raise ConfigError("router_order 'topk_softmax' (a softmax over the chosen experts) gives gates that sum "
                              "to 1: router_norm must be 'topk'")
        if self.shared_expert_gate and not self.shared_expert_hidden:
            raise ConfigError("shared_expert_gate needs a shared expert: set shared_expert_hidden")
        layers = self.dense_layers
        if not isinstance(layers, tuple) or not all(isinstance(i, int) and not isinstance(i, bool) for i in layers):
            raise ConfigError(f"dense_layers must be a list of layer indices, got {layers!r:.80}")
        if any(not 0 <= i < self.n_layers for i in layers) or len(set(layers)) != len(layers):
            raise ConfigError(f"dense_layers {list(layers)[:8]} must be distinct layers in 0..{self.n_layers - 1}")

    def _check_layer_types(self) -> None:
        if self.layer_types is None:
            return
        if not isinstance(self.layer_types, tuple):
            raise ConfigError(f"layer_types must be a list of {list(LAYER_TYPES)}, got {self.layer_types!r:.80}")
        if len(self.layer_types) != self.n_layers:
            raise ConfigError(f"layer_types has {len(self.layer_types)} entries but n_layers={self.n_layers}: "
                              "give one kind per layer")
        bad = sorted({str(kind) for kind in self.layer_types if kind not in LAYER_TYPES})
        if bad:
            raise ConfigError(f"layer_types: unknown kinds {bad}; each layer is one of {list(LAYER_TYPES)}")
        if "sliding" in self.layer_types and self.sliding_window is None:
            raise ConfigError("layer_types has sliding layers but sliding_window is None: set the window")

    # ---- derived quantities -------------------------------------------------------------------
    @property
    def n_groups(self) -> int:
        """Query heads served by each KV head: 1 for MHA, n_heads for MQA."""
        return self.n_heads // self.n_kv_heads

    @property
    def attention_kind(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    def is_moe_layer(self, i: int) -> bool:
        """Whether layer ``i`` routes its tokens to experts (a MoE model may keep some layers dense)."""
        return self.is_moe and i not in self.dense_layers

    @property
    def moe_layers(self) -> tuple[int, ...]:
        """The layers with a Mixture-of-Experts FFN, in order (none for a dense model)."""
        return tuple(i for i in range(self.n_layers) if self.is_moe_layer(i))

    @property
    def expert_width(self) -> int:
        """Each routed expert's hidden width: ``expert_hidden``, or ``ffn_hidden``."""
        return self.ffn_hidden if self.expert_hidden is None else self.expert_hidden

    @property
    def rope_dims(self) -> int:
        """How many dimensions of each head RoPE rotates: ``rotary_dims``, or all of head_dim."""
        return self.head_dim if self.rotary_dims is None else self.rotary_dims

    def layer_window(self, i: int) -> int | None:
        """The attention window of layer ``i`` in tokens, None for full (global) attention."""
        if not 0 <= i < self.n_layers:
            raise IndexError(f"layer {i} out of range for n_layers={self.n_layers}")
        if self.layer_types is None or self.layer_types[i] == "sliding":
            return self.sliding_window
        return None

    def is_sliding(self, i: int) -> bool:
        return self.layer_window(i) is not None

    def layer_rope_theta(self, i: int) -> float:
        """The RoPE base of layer ``i``: ``rope_local_theta`` on sliding layers when set, else rope_theta."""
        if self.is_sliding(i) and self.rope_local_theta is not None:
            return self.rope_local_theta
        return self.rope_theta

    def layer_uses_rope(self, i: int) -> bool:
        """Whether layer ``i`` rotates q and k by RoPE (False on SmolLM3's NoPE layers and without RoPE)."""
        if not 0 <= i < self.n_layers:
            raise IndexError(f"layer {i} out of range for n_layers={self.n_layers}")
        return self.positions == "rope" and (self.layer_rope is None or self.layer_rope[i])

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        """Every layer's window (None: full), in order."""
        return tuple(self.layer_window(i) for i in range(self.n_layers))

    def replace(self, **changes: Any) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown ModelConfig fields: {sorted(unknown)}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
