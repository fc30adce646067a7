"""What sets a model's memory, in the calculator's terms: a ``MemoryModel`` holds the shapes the weights,
the KV cache, FLOPs and activations are computed from (by ``txviz.analysis.kv.memory``), for models
txviz can run (``from_config``), any Hugging Face config.json (``from_geometry``, ``from_config_json``,
read by ``txviz.geometry``) and the published presets (``preset``; the data in
``txviz.analysis.kv.presets``). ``kind_variants`` gives the same model with MHA, GQA and MQA attention.

Per token and layer the cache keeps K and V for every KV head (MHA: one per query head; GQA: one per
group; MQA: one), or, with DeepSeek's multi-head latent attention (MLA), one compressed latent plus
one small RoPE key shared by all heads (DeepSeek-AI 2024). Layers differ in how many tokens they keep
and whether they keep K and V at all (``layer_groups``, txviz.analysis.kv.layer_groups).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from txviz.analysis.kv.layer_groups import LayerGroup, groups_of_geometry, groups_of_windows
from txviz.analysis.kv.presets import PRESETS
from txviz.config import ModelConfig
from txviz.model.counts import count_active_params, count_params
from txviz.model.kv_cache import kv_elements_per_token_layer

Kind = Literal["MHA", "GQA", "MQA", "MLA"]


@dataclass(frozen=True)
class MemoryModel:
    """What sets a model's memory, for models txviz can run (``from_config``) and those it cannot (MLA).

    For MLA, ``kv_heads``·``head_dim`` describe attention after the latent is expanded (informative
    only); the cache holds ``latent_dim + rope_dim`` elements per token and layer. ``window_layers``:
    how many layers use ``sliding_window`` (None: all of them). ``layer_groups``: the layers by what they
    keep; given, they set ``sliding_window`` (the narrowest window) and ``window_layers``, else they are
    derived from those two.
    """

    name: str
    n_layers: int
    n_heads: int
    kv_heads: int
    head_dim: int
    n_params: int
    latent_dim: int = 0  # MLA: width of the compressed KV latent (DeepSeek's kv_lora_rank)
    rope_dim: int = 0  # MLA: the decoupled RoPE key, one per token shared by all heads
    sliding_window: int | None = None
    window_layers: int | None = None
    active_params: int | None = None  # per token (MoE); None: all of n_params
    max_context: int | None = None  # what the model was built for (max_position_embeddings)
    source: str = ""
    d_model: int = 0  # residual width; 0: n_heads × head_dim
    ffn_width: int = 0  # FFN hidden width one token runs through (a MoE: its top-k experts'); 0: 4 × d_model
    vocab_size: int = 0  # 0: unknown (no logits counted)
    unmultiplied_params: int = 0  # no matmul FLOPs: looked-up embedding tables, norm weights, biases
    qk_head_dim: int = 0  # width of one query·key product (MLA: nope + rope); 0: head_dim
    n_experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    assumptions: tuple[str, ...] = ()  # what reading a config of an unknown family assumed
    kv_bias: bool = False  # K and V projections carry biases
    param_groups: tuple[tuple[str, int], ...] = ()  # per txviz.geometry.params.GROUPS (configs only)
    weight_format: object = None  # the published quantization (txviz.geometry.quantization.WeightFormat)
    layer_groups: tuple[LayerGroup, ...] = ()
    ignored: tuple[str, ...] = ()  # config keys no reader understood, as warnings (txviz.geometry.unread)
    attention_sinks: int = 0  # learned sink logits per attention layer (gpt-oss): in n_params, no KV

    def __post_init__(self) -> None:
        for key in ("n_layers", "n_heads", "kv_heads", "head_dim", "n_params"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{key} must be a positive integer, got {value!r}")
        if self.latent_dim == 0 and self.n_heads % self.kv_heads:
            raise ValueError(f"n_heads={self.n_heads} is not divisible by kv_heads={self.kv_heads}")
        if self.latent_dim < 0 or self.rope_dim < 0 or (self.rope_dim and not self.latent_dim):
            raise ValueError("latent_dim and rope_dim describe MLA: rope_dim needs latent_dim > 0")
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise ValueError(f"sliding_window must be positive or None, got {self.sliding_window}")
        if self.window_layers is None and self.sliding_window:
            object.__setattr__(self, "window_layers", self.n_layers)
        if self.window_layers is not None and not 0 <= self.window_layers <= self.n_layers:
            raise ValueError(f"window_layers={self.window_layers} must be between 0 and n_layers={self.n_layers}")
        if min(self.d_model, self.ffn_width, self.vocab_size) < 0:
            raise ValueError("d_model, ffn_width and vocab_size must be >= 0 (0: derived or unknown)")
        if not self.d_model:
            object.__setattr__(self, "d_model", self.n_heads * self.head_dim)
        if not self.ffn_width:
            object.__setattr__(self, "ffn_width", 4 * self.d_model)
        self._settle_groups()

    def _settle_groups(self) -> None:
        if not self.layer_groups:
            object.__setattr__(self, "layer_groups",
                               groups_of_windows(self.n_layers, self.sliding_window, self.window_layers or 0))
            return
        if sum(group.layers for group in self.layer_groups) != self.n_layers:
            raise ValueError(f"layer_groups must hold the {self.n_layers} layers")
        windowed = [g for g in self.layer_groups if g.caches_kv and g.window is not None]
        object.__setattr__(self, "sliding_window", min(g.window for g in windowed) if windowed else None)
        object.__setattr__(self, "window_layers", sum(g.layers for g in windowed) if windowed else None)

    @property
    def kv_layers(self) -> int:
        """Layers that keep K and V (all but linear-attention and state-space layers)."""
        return sum(group.layers for group in self.layer_groups if group.caches_kv)

    @property
    def state_elements_per_sequence(self) -> int:
        """Fixed state of the layers that keep no K and V, per sequence."""
        return sum(group.layers * group.state_elements for group in self.layer_groups)

    @property
    def kind(self) -> Kind:
        if self.latent_dim:
            return "MLA"
        if self.kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.kv_heads == 1 else "GQA"

    @property
    def kv_elements_per_token_layer(self) -> int:
        """Elements one token adds to one layer's cache."""
        if self.latent_dim:
            return self.latent_dim + self.rope_dim
        return kv_elements_per_token_layer(self.kv_heads, self.head_dim)

    @property
    def n_window_layers(self) -> int:
        return self.window_layers if self.sliding_window else 0

    @classmethod
    def from_config(cls, config: ModelConfig) -> "MemoryModel":
        return cls(name=config.name, n_layers=config.n_layers, n_heads=config.n_heads,
                   kv_heads=config.n_kv_heads, head_dim=config.head_dim, n_params=count_params(config),
                   active_params=count_active_params(config),
                   sliding_window=config.sliding_window if any(config.layer_windows) else None,
                   window_layers=sum(w is not None for w in config.layer_windows),  # Gemma 2/3: some layers
                   max_context=config.max_seq_len, source=config.source or "computed from its ModelConfig",
                   d_model=config.d_model, vocab_size=config.vocab_size,
                   ffn_width=config.ffn_hidden * (config.top_k if config.is_moe else 1), kv_bias=config.qkv_bias)

    @classmethod
    def from_geometry(cls, geometry, name: str, source: str) -> "MemoryModel":
        """A config's geometry (txviz.geometry) in the calculator's terms: one KV width for all layers, which
        every family read there has; layers grouped by what they keep."""
        if len(set(geometry.kv_heads)) > 1 or len(set(geometry.head_dims)) > 1:
            raise ValueError(f"{name}: layers differ in KV heads or head size, which the calculator does not model")
        return cls(name=name, n_layers=geometry.n_layers, n_heads=geometry.n_heads, kv_heads=geometry.kv_heads[0],
                   head_dim=geometry.head_dims[0], n_params=geometry.n_params,
                   latent_dim=geometry.latent_dim, rope_dim=geometry.rope_dim,
                   layer_groups=groups_of_geometry(geometry), ignored=geometry.ignored,
                   attention_sinks=geometry.attention_sinks,
                   active_params=geometry.active_params, max_context=geometry.max_context, source=source,
                   d_model=geometry.d_model, ffn_width=geometry.ffn_width, vocab_size=geometry.vocab_size,
                   unmultiplied_params=geometry.unmultiplied_params, qk_head_dim=geometry.qk_head_dim,
                   n_experts=geometry.n_experts, experts_per_token=geometry.experts_per_token,
                   assumptions=geometry.assumptions, kv_bias=geometry.kv_bias, param_groups=geometry.param_groups,
                   weight_format=geometry.weight_format)

    @classmethod
    def from_config_json(cls, data: bytes, filename: str = "config.json", *,
                         max_bytes: int | None = None) -> "MemoryModel":
        """An uploaded config.json of any causal LM (txviz.geometry), named after what it describes
        rather than its family ("llama"): its ``_name_or_path``, else the file's own name unless that is
        just "config", then the architecture, parameters and layers, so that two uploads are told apart.
        More than ``max_bytes`` (default: txviz.loading.hf.config.MAX_CONFIG_BYTES) is refused unparsed."""
        from pathlib import PurePath

        from txviz.geometry import read_geometry
        from txviz.loading.hf.config import MAX_CONFIG_BYTES, parse_config_json

        raw, _ = parse_config_json(data, max_bytes=max_bytes or MAX_CONFIG_BYTES)
        geometry = read_geometry(raw)
        named = str(raw.get("_name_or_path") or "").rstrip("/").split("/")[-1]
        stem = PurePath(filename).stem
        named = named or ("" if stem.lower() in ("config", "") else stem)
        size = (f"{geometry.architecture}, {params_text(geometry.n_params)} params, "
                f"{geometry.n_layers} layer{'s' * (geometry.n_layers != 1)} × {geometry.d_model}")
        source = f"uploaded file {filename}" + (f" ({raw['_name_or_path']})" if named and raw.get("_name_or_path")
                                                 else "")
        notes = "".join(f"; {note}" for note in geometry.notes)  # what the count leaves out (a vision tower)
        return cls.from_geometry(geometry, f"{named} ({size})" if named else size, source + notes)


Spec = MemoryModel | ModelConfig


def params_text(n: int) -> str:
    """A parameter count as read: billions to two decimals, millions to one, else the count itself."""
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n:,}"


def as_memory_model(spec: Spec) -> MemoryModel:
    return spec if isinstance(spec, MemoryModel) else MemoryModel.from_config(spec)


def preset(name: str) -> MemoryModel:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose from: {', '.join(PRESETS)}")
    fields = dict(PRESETS[name])
    fields["layer_groups"] = tuple(LayerGroup(*group) for group in fields.get("layer_groups", ()))
    published = fields.pop("quantization_config", None)
    if published is not None:
        from txviz.geometry.quantization import read_quantization

        fields["weight_format"] = read_quantization({"quantization_config": published},
                                                    dict(fields["param_groups"]))[0]
    return MemoryModel(**fields)


def kind_variants(spec: Spec, gqa_kv_heads: int | None = None) -> dict[str, MemoryModel]:
    """The same model with MHA, GQA and MQA attention: the KV heads and the K/V projections that
    serve them (``with_kv_heads``). GQA keeps the model's own
    kv_heads if it has GQA, else ``gqa_kv_heads`` or the divisor of n_heads nearest n_heads/4;
    it is left out when n_heads has no divisor between 1 and n_heads (e.g. Falcon's 71)."""
    model = as_memory_model(spec)
    if model.kind == "MLA":
        raise ValueError("an MLA model caches a latent, not per-head K and V; compare presets instead")
    h = model.n_heads
    middle = [d for d in range(2, h) if h % d == 0]
    gqa = model.kv_heads if model.kind == "GQA" else gqa_kv_heads or (
        min(middle, key=lambda d: abs(d - h / 4)) if middle else None)
    counts = {"MHA": h, "GQA": gqa, "MQA": 1}
    return {kind: with_kv_heads(model, n, f"{model.name} as {kind} ({n} KV heads)")
            for kind, n in counts.items() if n is not None}


def with_kv_heads(model: MemoryModel, kv_heads: int, name: str) -> MemoryModel:
    """The model with ``kv_heads`` KV heads, and the K and V projections (d_model × kv_heads·head_dim
    each, per layer, and their biases) that many heads need: parameters, weight bytes, FLOPs and
    activations all follow, not only the cache."""
    extra = kv_heads - model.kv_heads
    weights = model.kv_layers * 2 * model.d_model * model.head_dim * extra  # only layers that keep K and V
    biases = model.kv_layers * 2 * model.head_dim * extra if model.kv_bias else 0
    groups = dict(model.param_groups)
    if groups:
        groups["attention"] += weights
        groups["small"] += biases
    active = None if model.active_params is None else model.active_params + weights + biases
    return replace(model, kv_heads=kv_heads, name=name, n_params=model.n_params + weights + biases,
                   active_params=active, unmultiplied_params=model.unmultiplied_params + biases,
                   param_groups=tuple(groups.items()))
