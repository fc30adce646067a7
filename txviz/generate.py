"""Autoregressive generation with the KV cache.

    prefill:   run the whole prompt once, fill the cache, keep the last position's logits
    decode:    feed one token, attend it against the cached keys/values, get the next logits

Each decode step computes Q, K, V for one token only and attends over the n cached ones: O(n) work
per step instead of the O(n²) of recomputing the whole sequence. ``generate(..., use_cache=False)``
does exactly that recomputation, so the two can be timed side by side; both give the same tokens.

Sampling turns logits into a token: temperature 0 is greedy (argmax); otherwise the logits are
divided by the temperature, optionally cut to the top-k tokens and to the nucleus (the smallest set
whose probability reaches top_p; Holtzman et al. 2020), and one token is drawn with a seeded
``torch.Generator`` so a run can be reproduced.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Literal

import torch
from torch.nn import functional as F

from txviz.model import InputError, KVCache
from txviz.model.placement import layer_devices
from txviz.model.recording import NULL_RECORDER, RecorderProtocol


# ---- sampling -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sampling:
    """How to pick the next token. ``temperature=0`` is greedy and ignores top_k/top_p."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None  # None: a fresh random seed each run

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be a finite number >= 0 (0 is greedy), got {self.temperature}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ValueError(f"top_k must be a positive integer or None, got {self.top_k!r}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def generator(self, device: torch.device | str = "cpu") -> torch.Generator:
        generator = torch.Generator(device=device)
        if self.seed is None:
            generator.seed()
        else:
            generator.manual_seed(self.seed)
        return generator


GREEDY = Sampling()


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """(B, V) logits with −inf outside the top-k tokens and outside the top-p nucleus."""
    if top_k is not None and top_k < logits.shape[-1]:
        kth_best = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    if top_p is not None and top_p < 1:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (B, V)
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # probability of the better tokens
        drop_sorted = mass_before >= top_p  # the best token always has 0 before it, so it stays
        drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sampling_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """(B, V) logits → (B, V) the distribution the next token is drawn from: softmax of the logits
    divided by the temperature, cut to top-k and top-p and renormalised (0 for cut tokens). Greedy
    puts all the mass on the argmax."""
    if sampling.greedy:
        return F.one_hot(logits.argmax(dim=-1), logits.shape[-1]).float()
    scaled = logits.float() / sampling.temperature
    return torch.softmax(filter_logits(scaled, sampling.top_k, sampling.top_p), dim=-1)


def draw_token(probs: torch.Tensor, sampling: Sampling, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, V) ``sampling_probs`` → (B,) token ids: the argmax when greedy, else one seeded draw."""
    if sampling.greedy:
        return probs.argmax(dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]


def sample_token(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, V) logits → (B,) token ids."""
    if sampling.greedy:
        return logits.argmax(dim=-1)
    return draw_token(sampling_probs(logits, sampling), sampling, generator)


# ---- one step -----------------------------------------------------------------------------------
def prefill(model, ids, cache: KVCache, record: RecorderProtocol = NULL_RECORDER) -> torch.Tensor:
    """Run the prompt ids (B, T) through the model into ``cache``; return the last logits (B, V).
    ``record`` sees the call (txviz.model.recording), as any forward call's recorder does."""
    with torch.inference_mode():
        return model(ids, cache=cache, record=record, last_only=True)[:, -1]


def decode_one_token(model, token, cache: KVCache, record: RecorderProtocol = NULL_RECORDER) -> torch.Tensor:
    """Feed one token per sequence (an int, (B,) or (B, 1)) after the cached ones; return logits (B, V)."""
    token = torch.as_tensor(token, dtype=torch.long).reshape(-1, 1)  # (B, 1)
    with torch.inference_mode():
        return model(token, cache=cache, record=record)[:, -1]


# ---- records ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One generated token. ``position`` is where it lands in the sequence; by then the cache holds
    every token before it, i.e. ``position`` tokens (0 bytes when generating without a cache)."""

    index: int
    position: int
    token: int
    tokens_computed: int  # tokens run through the model to get it: the prompt, then 1 (or all, uncached)
    seconds: float
    cache_bytes_per_layer: tuple[int, ...]

    @property
    def cache_bytes(self) -> int:
        return sum(self.cache_bytes_per_layer)


@dataclass(frozen=True)
class Generation:
    prompt_ids: tuple[int, ...]
    new_ids: tuple[int, ...]
    steps: tuple[Step, ...]
    use_cache: bool
    stop_reason: Literal["max_new_tokens", "stop_id"]
    cache_capacity_bytes: int  # what was preallocated (0 without a cache)

    @property
    def ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.new_ids

    @property
    def total_seconds(self) -> float:
        return sum(step.seconds for step in self.steps)


# ---- the loop -----------------------------------------------------------------------------------
class _CachedRun:
    """Prefill once, then one token per step against a cache sized for prompt + new tokens."""

    def __init__(self, model, prompt: torch.Tensor, max_new_tokens: int):
        self.model, self.prompt = model, prompt
        self.cache = KVCache(model.config, prompt.shape[1] + max_new_tokens, batch=prompt.shape[0],
                             dtype=model.embed.weight.dtype, device=layer_devices(model))

    def next_logits(self, previous: int | None) -> tuple[torch.Tensor, int]:
        if previous is None:
            return prefill(self.model, self.prompt, self.cache), self.prompt.shape[1]
        return decode_one_token(self.model, previous, self.cache), 1

    def cache_bytes_per_layer(self) -> tuple[int, ...]:
        return tuple(self.cache.used_nbytes_per_layer())


class _UncachedRun:
    """Recompute the whole sequence every step: the O(n²) baseline the cache is measured against."""

    def __init__(self, model, prompt: torch.Tensor):
        self.model, self.ids = model, prompt
        self.cache = None

    def next_logits(self, previous: int | None) -> tuple[torch.Tensor, int]:
        if previous is not None:
            self.ids = torch.cat([self.ids, torch.tensor([[previous]], device=self.ids.device)], dim=1)
        with torch.inference_mode():
            return self.model(self.ids, last_only=True)[:, -1], self.ids.shape[1]

    def cache_bytes_per_layer(self) -> tuple[int, ...]:
        return (0,) * self.model.config.n_layers


def check_request(model, ids, max_new_tokens: int) -> torch.Tensor:
    """The prompt ids as (1, T), or an InputError saying why they and ``max_new_tokens`` cannot run."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise InputError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    prompt = model.check_ids(ids)  # (B, T); empty, non-integer and out-of-vocabulary ids raise here
    if prompt.shape[0] != 1:
        raise InputError(f"generate takes one prompt at a time, got a batch of {prompt.shape[0]}")
    total, context = prompt.shape[1] + max_new_tokens, model.config.max_seq_len
    if total > context:
        raise InputError(f"prompt of {prompt.shape[1]} tokens + {max_new_tokens} new tokens = {total} "
                         f"exceeds the model's context of {context}")
    return prompt


def generate(model, ids, max_new_tokens: int, *, sampling: Sampling = GREEDY, stop_ids: Iterable[int] = (),
             on_step: Callable[[Step], None] | None = None, use_cache: bool = True) -> Generation:
    """Generate up to ``max_new_tokens`` after the prompt ``ids`` ((T,) or (1, T)).

    Stops early after emitting a token in ``stop_ids`` (that token is kept). ``on_step`` is called
    with each Step as soon as its token is chosen. ``use_cache=False`` recomputes the full sequence
    every step instead of using the KV cache.
    """
    prompt = check_request(model, ids, max_new_tokens)
    stop = frozenset(int(token) for token in stop_ids)
    run = _CachedRun(model, prompt, max_new_tokens) if use_cache else _UncachedRun(model, prompt)
    generator = None
    steps: list[Step] = []
    previous, stop_reason = None, "max_new_tokens"
    for index in range(max_new_tokens):
        start = time.perf_counter()
        logits, computed = run.next_logits(previous)
        if generator is None and not sampling.greedy:  # where the logits are (a split model: the ids')
            generator = sampling.generator(logits.device)
        token = int(sample_token(logits, sampling, generator)[0])
        seconds = time.perf_counter() - start
        step = Step(index=index, position=prompt.shape[1] + index, token=token, tokens_computed=computed,
                    seconds=seconds, cache_bytes_per_layer=run.cache_bytes_per_layer())
        steps.append(step)
        if on_step is not None:
            on_step(step)
        if token in stop:
            stop_reason = "stop_id"
            break
        previous = token
    return Generation(prompt_ids=tuple(prompt[0].tolist()), new_ids=tuple(s.token for s in steps),
                      steps=tuple(steps), use_cache=use_cache, stop_reason=stop_reason,
                      cache_capacity_bytes=run.cache.nbytes if run.cache is not None else 0)
