"""Reading numbers out of a Hugging Face config.json dict, strictly: each field under any of its
common spellings, checked (a whole number in range, not a bool, not text, and no larger than any real
model's: txviz.config.SIZE_BOUNDS, so that a hostile ``num_hidden_layers: 1e9`` is refused before any
per-layer work), and every missing one remembered so that a refusal names them all at once instead of
the first."""

from __future__ import annotations

import math
from typing import Any

from txviz.config import SIZE_BOUNDS

MAX_COUNT = (1 << 31) - 1  # no width, layer count or vocabulary is anywhere near this

# Each count's ceiling: the bound of the ModelConfig field it plays (txviz.config.SIZE_BOUNDS).
# Counts of layers (a window's first layer, a MoE step) are bounded like the layers themselves.
BOUNDED_AS: dict[str, str] = {
    "num_hidden_layers": "n_layers", "max_window_layers": "n_layers", "first_k_dense_replace": "n_layers",
    "moe_layer_freq": "n_layers", "decoder_sparse_step": "n_layers", "sliding_window_pattern": "n_layers",
    "num_ln_in_parallel_attn": "n_layers",
    "hidden_size": "d_model", "kv_lora_rank": "d_model", "q_lora_rank": "d_model",
    "num_attention_heads": "n_heads", "num_key_value_heads": "n_kv_heads", "kv_n_heads": "n_kv_heads",
    "head_dim": "head_dim", "qk_nope_head_dim": "head_dim", "qk_rope_head_dim": "head_dim", "v_head_dim": "head_dim",
    "intermediate_size": "ffn_hidden", "moe_intermediate_size": "ffn_hidden",
    "shared_expert_intermediate_size": "ffn_hidden",
    "vocab_size": "vocab_size", "max_position_embeddings": "max_seq_len", "sliding_window": "max_seq_len",
    "num_experts": "n_experts", "num_local_experts": "n_experts", "n_routed_experts": "n_experts",
    "n_shared_experts": "n_experts", "num_experts_per_tok": "top_k",
    # the 2025 layouts: periods and intervals of layers, a chunk of tokens, linear attention's heads
    "attn_layer_period": "n_layers", "attn_layer_offset": "n_layers", "expert_layer_period": "n_layers",
    "expert_layer_offset": "n_layers", "full_attention_interval": "n_layers", "no_rope_layer_interval": "n_layers",
    "interleave_moe_layer_step": "n_layers", "attention_chunk_size": "max_seq_len",
    "linear_num_key_heads": "n_heads", "linear_num_value_heads": "n_heads", "linear_key_head_dim": "head_dim",
    "linear_value_head_dim": "head_dim", "intermediate_size_mlp": "ffn_hidden",
}


def largest(name: str) -> int:
    """The largest value a count named ``name`` (its canonical spelling) may take."""
    return SIZE_BOUNDS[BOUNDED_AS[name]] if name in BOUNDED_AS else MAX_COUNT

# The spellings families use for the same number (HF's attribute_map of each config class).
ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model", "model_dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "kv_n_heads",
                            "multi_query_group_num"),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size", "n_vocab"),
    "num_experts": ("num_experts", "num_local_experts"),  # transformers 5 writes Qwen3-MoE's as num_local_experts
    "num_local_experts": ("num_local_experts", "num_experts"),  # OLMoE's config says num_experts
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx"),
}


class GeometryError(ValueError):
    """A config.json whose geometry cannot be read: the message names the fields at fault."""


class ReadKeys(dict):
    """A config dict that remembers which keys were looked at (``seen``, shared between the copies a
    reader makes): what no reader looked at is what it did not understand (txviz.geometry.unread)."""

    def __init__(self, raw: dict, seen: set[str] | None = None):
        super().__init__(raw)
        self.seen = set() if seen is None else seen

    def get(self, key, default=None):
        self.seen.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.seen.add(key)
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        self.seen.add(key)
        return super().__contains__(key)


class Fields:
    """One config dict being read; ``missing`` collects required fields that are absent, ``seen`` every
    key looked at (``seen`` may be shared with another Fields reading a copy of the same config)."""

    def __init__(self, raw: dict, model_type: str, seen: set[str] | None = None):
        self.raw, self.model_type, self.missing = ReadKeys(raw, seen), model_type, []

    @property
    def seen(self) -> set[str]:
        return self.raw.seen

    def _lookup(self, name: str) -> tuple[str, Any]:
        self.seen.update(ALIASES.get(name, (name,)))  # every spelling of the number is understood
        for key in ALIASES.get(name, (name,)):
            if self.raw.get(key) is not None:
                return key, self.raw[key]
        return name, None

    def has(self, name: str) -> bool:
        return self._lookup(name)[1] is not None

    def count(self, name: str, default: int | None = None, minimum: int = 1) -> int:
        """A whole number >= ``minimum``; ``default`` when absent, or recorded as missing (returns 1
        so that reading can go on and name every missing field)."""
        key, value = self._lookup(name)
        if value is None:
            if default is None:
                self.missing.append(name)
                return 1
            return default
        return whole(key, value, minimum, largest(name))

    def optional(self, name: str) -> int | None:
        key, value = self._lookup(name)
        return None if value is None else whole(key, value, 1, largest(name))

    def flag(self, name: str, default: bool) -> bool:
        value = self.raw.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise GeometryError(f"config.json: {name} must be true or false, got {str(value)[:80]!r}")
        return value

    def number(self, name: str, default: float) -> float:
        value = self.raw.get(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise GeometryError(f"config.json: {name} must be a positive number, got {str(value)[:80]!r}")
        return float(value)

    def check(self) -> None:
        if self.missing:
            names = ", ".join(f"{n} (or {', '.join(ALIASES[n][1:])})" if len(ALIASES.get(n, ())) > 1 else n
                              for n in dict.fromkeys(self.missing))
            raise GeometryError(f"config.json of model_type {self.model_type!r} lacks the numbers its size "
                                f"needs: {names}")


def whole(key: str, value: Any, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """``value`` as an int in [minimum, maximum]; integral floats (4096.0) are accepted."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise GeometryError(f"config.json: {key} must be a whole number, got {str(value)[:80]!r}")
    if value > maximum:
        raise GeometryError(f"config.json: {key} = {compact(value)} is beyond any real model (at most {maximum:,})")
    if not minimum <= value <= maximum:
        raise GeometryError(f"config.json: {key} must be between {minimum} and {maximum:,}, got {compact(value)}")
    return value


def compact(value: int) -> str:
    """A count as a reader takes it in: in full up to 15 digits, else in e-notation ("1e+300", not the
    301 digits a JSON 1e300 becomes as an int); past a float's range, its number of digits."""
    if abs(value) < 10 ** 15:
        return f"{value:,}"
    try:
        return f"{float(value):.3g}"
    except OverflowError:  # beyond ~1.8e308
        return f"a {'negative ' * (value < 0)}{int(math.log10(abs(value))) + 1:,}-digit number"


def text_part(raw: dict) -> dict:
    """A multimodal config (Gemma 3, Llava...) nests the language model under ``text_config``: that
    part, with the top-level fields it does not set (tie_word_embeddings, _name_or_path)."""
    nested = raw.get("text_config")
    if nested is None:
        return raw
    if not isinstance(nested, dict):
        raise GeometryError(f"config.json: text_config must be an object, got {type(nested).__name__}")
    inherited = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config", "model_type")}
    return {**inherited, **nested}


def architectures(raw: dict) -> list[str]:
    """The config's ``architectures``: a list of class names (empty when absent)."""
    names = raw.get("architectures") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise GeometryError(f"config.json: architectures must be a list of names, got {str(names)[:80]!r}")
    return names
