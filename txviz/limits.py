"""Resource limits of a shared txviz, in one place: how long a prompt may be, how many tokens may be
generated, how much memory one request may take, how large an uploaded config.json may be.

    limits = Limits.from_env()                                  # TXVIZ_* environment variables
    limits = limits.with_overrides(st.secrets)                  # the app only: secrets win over env
    check_prompt_tokens(n_tokens, config, limits)               # LimitExceeded above either limit
    check_budget(trace_estimate(config, n_tokens, ("attn_probs",)), limits)

A request is estimated before it runs (bytes kept + the largest temporaries, and a rough time) and
refused above the budget with the estimate and the setting to change, so a shared server says "no"
instead of running out of memory. Trace estimates come from txviz.capture.cost; generation adds the
KV cache (txviz.model.kv_cache). Times assume ``gflops`` sustained, a rough figure for a small CPU.

Settings (environment variable, default):
  TXVIZ_MAX_TOKENS        1024     tokens a traced prompt may have (attention maps grow with T²)
  TXVIZ_MAX_LONG_TOKENS   8192     tokens the Attention page reads: past TXVIZ_MAX_TOKENS it keeps every
                                   head's summaries and rebuilds one map at a time (txviz.capture.cost)
  TXVIZ_MAX_NEW_TOKENS    256      tokens one generation may add
  TXVIZ_MEMORY_BUDGET     2GiB     bytes one trace or generation may take (e.g. 2147483648, 512MiB, 4GB)
  TXVIZ_TRACE_CACHE_BYTES 4GiB     bytes of traces the app keeps for all sessions together
  TXVIZ_MAX_CONFIG_BYTES  1MiB     size of a config.json read or uploaded
  TXVIZ_MAX_PROMPT_CHARS  100000   characters of a prompt, checked before tokenizing
  TXVIZ_GFLOPS            50       sustained GFLOP/s assumed for time estimates
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields, replace
from typing import Iterable, Mapping

from txviz.config import ModelConfig

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": KIB, "m": 1000**2, "mb": 1000**2, "mib": MIB,
         "g": 1000**3, "gb": 1000**3, "gib": GIB, "t": 1000**4, "tb": 1000**4, "tib": 1 << 40}


class LimitError(ValueError):
    """A limit setting that is not a positive number (or size); the message names the variable."""


class LimitExceeded(ValueError):
    """A request above a limit: the message gives the count or estimate, the limit and its setting."""


def parse_size(text: str | int | float) -> int:
    """Bytes from ``2147483648``, ``"512MiB"``, ``"4 GB"``, ``"1.5GiB"`` (case-insensitive)."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
        if not match or match[2].lower() not in UNITS:
            raise ValueError(f"not a size: {text!r} (write e.g. 2147483648, 512MiB or 2GB)")
        value, unit = float(match[1]), match[2].lower()
    size = value * UNITS[unit]
    if not math.isfinite(size) or size < 1:
        raise ValueError(f"not a positive size: {text!r}")
    return int(size)


def _whole(text) -> int:
    if isinstance(text, bool) or (isinstance(text, float) and not text.is_integer()):
        raise ValueError(f"not a whole number: {text!r}")
    value = int(str(text).strip()) if not isinstance(text, (int, float)) else int(text)
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


def _positive(text) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a positive number, got {text!r}")
    return value


@dataclass(frozen=True)
class Limits:
    """The limits in force. Build with ``from_env``; the app layers Streamlit secrets on top."""

    max_prompt_tokens: int = 1024
    max_long_tokens: int = 8192
    max_new_tokens: int = 256
    memory_budget_bytes: int = 2 * GIB
    trace_cache_bytes: int = 4 * GIB
    max_config_bytes: int = 1 * MIB
    max_prompt_chars: int = 100_000
    gflops: float = 50.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                    or not math.isfinite(value):
                raise LimitError(f"{ENV_NAMES[f.name]} must be positive, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Limits":
        return cls().with_overrides(os.environ if environ is None else environ)

    def with_overrides(self, settings: Mapping[str, object]) -> "Limits":
        """These limits with every ``TXVIZ_*`` setting found in ``settings`` applied (env or secrets);
        a malformed value raises LimitError naming it."""
        changes = {}
        for name, variable in ENV_NAMES.items():
            raw = settings.get(variable) if hasattr(settings, "get") else None
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue
            try:
                changes[name] = PARSERS[name](raw)
            except (ValueError, TypeError, OverflowError) as error:
                raise LimitError(f"{variable}={raw!r} is not valid: {error}") from None
        return replace(self, **changes)


ENV_NAMES = {
    "max_prompt_tokens": "TXVIZ_MAX_TOKENS", "max_long_tokens": "TXVIZ_MAX_LONG_TOKENS", "max_new_tokens": "TXVIZ_MAX_NEW_TOKENS",
    "memory_budget_bytes": "TXVIZ_MEMORY_BUDGET", "trace_cache_bytes": "TXVIZ_TRACE_CACHE_BYTES",
    "max_config_bytes": "TXVIZ_MAX_CONFIG_BYTES",
    "max_prompt_chars": "TXVIZ_MAX_PROMPT_CHARS", "gflops": "TXVIZ_GFLOPS",
}
PARSERS = {"max_prompt_tokens": _whole, "max_long_tokens": _whole, "max_new_tokens": _whole, "memory_budget_bytes": parse_size,
           "trace_cache_bytes": parse_size,
           "max_config_bytes": parse_size, "max_prompt_chars": _whole, "gflops": _positive}


def current() -> Limits:
    """The limits of this process's environment (read each call: cheap, and tests may change it)."""
    return Limits.from_env()


# ---- checks ---------------------------------------------------------------------------------------
def check_prompt_chars(n_chars: int, limits: Limits) -> None:
    if n_chars > limits.max_prompt_chars:
        raise LimitExceeded(f"The prompt has {n_chars:,} characters; at most {limits.max_prompt_chars:,} are "
                            f"accepted ({ENV_NAMES['max_prompt_chars']}). Shorten it or raise the limit.")


def check_prompt_tokens(n_tokens: int, config: ModelConfig, limits: Limits, *, n_new: int = 0,
                        long: bool = False) -> None:
    """The prompt (plus ``n_new`` generated tokens) must fit the model's context and the token limit:
    ``max_long_tokens`` for a view that keeps summaries past ``max_prompt_tokens`` (``long``)."""
    total = n_tokens + n_new
    what = f"The prompt has {n_tokens:,} tokens" + (f" + {n_new:,} new = {total:,}" if n_new else "")
    if total > config.max_seq_len:
        room = config.max_seq_len - n_tokens  # the new tokens that fit after the prompt: the knob to turn, when any
        turn = f"Ask for at most {room:,} new tokens, or shorten the prompt." if n_new and room > 0 else "Shorten it."
        raise LimitExceeded(f"{what}; the model's context is {config.max_seq_len:,} tokens. {turn}")
    name = "max_long_tokens" if long else "max_prompt_tokens"
    most = getattr(limits, name)
    if n_tokens > most:
        hint = "" if long or limits.max_long_tokens <= most else \
            f" The Attention page reads up to {limits.max_long_tokens:,} ({ENV_NAMES['max_long_tokens']})."
        raise LimitExceeded(f"{what}; this server runs at most {most:,} ({ENV_NAMES[name]}). "
                            f"Shorten it or raise the limit.{hint}")
    if n_new > limits.max_new_tokens:
        raise LimitExceeded(f"{n_new:,} new tokens asked; this server generates at most {limits.max_new_tokens:,} "
                            f"({ENV_NAMES['max_new_tokens']}).")


# ---- estimates ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """What a request would take: bytes beyond the loaded weights, and a rough time."""

    what: str
    bytes: int
    seconds: float

    def describe(self) -> str:
        return f"{self.what}: about {format_bytes(self.bytes)} and {format_seconds(self.seconds)}"


def format_bytes(n: float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def format_seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def trace_estimate(config: ModelConfig, n_tokens: int, capture: Iterable[str] = ("attn_probs",), *,
                   layers: Iterable[int] | None = None, element_bytes: int = 4, batch: int = 1,
                   gflops: float = Limits.gflops, maps=None) -> Estimate:
    """A trace of ``batch`` sequences of ``n_tokens`` capturing ``capture`` (txviz.capture.cost), maps
    kept as ``maps`` (a txviz.capture.maps.MapStorage; None: as the model computes them)."""
    from txviz.capture.cost import capture_cost
    from txviz.capture.maps import MapStorage

    cost = capture_cost(config, n_tokens, tuple(capture), layers=layers, element_bytes=element_bytes,
                        maps=maps if maps is not None else MapStorage())
    return Estimate(f"tracing {n_tokens:,} tokens" + (f" × {batch}" if batch > 1 else ""),
                    batch * (cost.stored_bytes + cost.transient_bytes), batch * cost.seconds(gflops))


def generation_estimate(config: ModelConfig, n_prompt: int, n_new: int, *, element_bytes: int = 4,
                        use_cache: bool = True, gflops: float = Limits.gflops) -> Estimate:
    """Generating ``n_new`` tokens after ``n_prompt``: the preallocated KV cache plus one forward's
    temporaries; time from the FLOPs of the prefill and every decode step (every step recomputes the
    whole sequence without the cache)."""
    from txviz.capture.cost import capture_cost
    from txviz.model.kv_cache import kv_cache_bytes

    total = n_prompt + n_new
    longest = capture_cost(config, max(total, 1), (), element_bytes=element_bytes)  # fused attention
    cache = kv_cache_bytes(config, total, 1, element_bytes) if use_cache else 0
    prefill = capture_cost(config, max(n_prompt, 1), (), element_bytes=element_bytes).flops
    if use_cache:  # each step: the projections of one token + attention over the cache
        per_step = longest.flops / max(total, 1)
        flops = prefill + n_new * per_step
    else:  # ~ the sum of full forwards of n_prompt … total − 1 tokens
        flops = prefill + n_new * (prefill + longest.flops) / 2
    return Estimate(f"generating {n_new:,} tokens after {n_prompt:,}" + ("" if use_cache else " without the cache"),
                    int(cache + longest.transient_bytes), flops / (gflops * 1e9))


def check_budget(estimate: Estimate, limits: Limits) -> Estimate:
    """The estimate if it fits the memory budget, else LimitExceeded saying what and which knob."""
    if estimate.bytes > limits.memory_budget_bytes:
        raise LimitExceeded(f"Refused: {estimate.describe()}, above this server's budget of "
                            f"{format_bytes(limits.memory_budget_bytes)} per request "
                            f"({ENV_NAMES['memory_budget_bytes']}). Shorten the prompt or ask for fewer tokens.")
    return estimate
