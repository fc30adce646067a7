"""Generation that records every step: ``decode`` is ``txviz.generate.generate`` with the KV cache
(the same prefill, decode step, sampling distribution and draw), and each step also keeps what
``StepRecordRequest`` asks for (txviz.decoding.step describes the record). The run keeps its cache
and, for windowed layers, its keys and values (txviz.decoding.history), so txviz.decoding.branch can
continue from any step without running the earlier tokens again.

``on_step`` sees each step as soon as its token is chosen (streaming); ``should_stop`` is asked
before each step, and a run stopped that way keeps what it generated. ``step_threads`` sets torch's
threads for the steps that feed one token, the caller's count coming back when the loop ends however
it ends: a caller that shows the tokens as they come (a web page) leaves a core to the showing, since a
one-token step gains little from a second thread while a prompt's pass and the lens read gain much.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Literal

import torch

from txviz.decoding.history import KVHistory
from txviz.decoding.lens import lens_reading, lens_readings
from txviz.decoding.recorder import StepRecorder
from txviz.decoding.request import StepRecordRequest
from txviz.decoding.sampler_view import SamplerView, TokenText
from txviz.decoding.step import DecodingStep
from txviz.generate import GREEDY, Sampling, check_request, decode_one_token, prefill
from txviz.model import KVCache
from txviz.model.placement import layer_devices

StopReason = Literal["max_new_tokens", "stop_id", "stopped"]


@dataclass
class RunState:
    """What a branch reuses: the run's cache and windowed keys/values, each step's residuals (for the
    lens of another candidate), and the run's stop ids and token text."""

    cache: KVCache
    history: KVHistory
    residuals: list[torch.Tensor | None]  # per step: (L+1, d) when the lens was asked for
    stop_ids: frozenset[int]
    token_text: TokenText | None


@dataclass(frozen=True)
class Decoding:
    prompt_ids: tuple[int, ...]
    steps: tuple[DecodingStep, ...]
    sampling: Sampling
    request: StepRecordRequest
    max_new_tokens: int
    stop_reason: StopReason
    cache_capacity_bytes: int
    branched_at: int | None = None  # the step a branch chose its own token at (None: not a branch)
    reused_tokens: int = 0  # tokens whose keys and values a branch took from the run it branched from
    state: RunState | None = field(default=None, compare=False, repr=False)

    @property
    def new_ids(self) -> tuple[int, ...]:
        return tuple(step.token.id for step in self.steps)

    @property
    def ids(self) -> tuple[int, ...]:
        return self.prompt_ids + self.new_ids

    @property
    def total_seconds(self) -> float:
        return sum(step.seconds for step in self.steps)


class StepLoop:
    """Runs steps on one cache: the prompt (or a branch's chosen token) first, then one token a step."""

    def __init__(self, model, sampling: Sampling, request: StepRecordRequest, state: RunState,
                 step_threads: int | None = None):
        self.model, self.sampling, self.request, self.state = model, sampling, request, state
        self.step_threads = step_threads  # torch threads for one-token steps (None: the caller's)
        self._heads = request.heads(model.config)
        self._generator: torch.Generator | None = None  # made at the first draw, where the logits are

    def run(self, feed: torch.Tensor, first_index: int, stop_index: int, *,
            on_step: Callable[[DecodingStep], None] | None = None,
            should_stop: Callable[[], bool] | None = None) -> tuple[list[DecodingStep], StopReason]:
        """Steps first_index..stop_index − 1, feeding ``feed`` (1, T) first; stops early after a stop id.
        One-token steps run on ``step_threads``; the caller's thread count is back on any return or raise."""
        steps: list[DecodingStep] = []
        callers_threads = torch.get_num_threads()
        try:
            for index in range(first_index, stop_index):
                if should_stop is not None and should_stop():
                    return steps, "stopped"
                if self.step_threads is not None:
                    torch.set_num_threads(self.step_threads if feed.shape[1] == 1 else callers_threads)
                step = self.step(feed, index)
                steps.append(step)
                if on_step is not None:
                    on_step(step)
                if step.token.id in self.state.stop_ids:
                    return steps, "stop_id"
                feed = torch.tensor([[step.token.id]])
            return steps, "max_new_tokens"
        finally:
            torch.set_num_threads(callers_threads)

    def step(self, feed: torch.Tensor, index: int) -> DecodingStep:
        """Run ``feed`` (1, T) after the cache, draw the next token and record the step (timed whole)."""
        start = time.perf_counter()
        cache, request = self.state.cache, self.request
        position = cache.seq_len + feed.shape[1]  # where the drawn token lands
        recorder = StepRecorder(cache, feed.shape[1], attention_layers=request.attention_layers, heads=self._heads,
                                lens=request.lens, history=self.state.history, model=self.model)
        if feed.shape[1] == 1:
            logits = decode_one_token(self.model, feed, cache, recorder)  # (1, V)
        else:
            logits = prefill(self.model, feed, cache, recorder)
        view = SamplerView(logits, self.sampling, self.state.token_text)
        if self._generator is None and not self.sampling.greedy:
            self._generator = self.sampling.generator(logits.device)
        token = view.draw(self._generator)
        residuals = recorder.residuals() if request.lens else None
        self.state.residuals.append(residuals)
        lens = None if residuals is None or request.lens_after_run else lens_reading(self.model, residuals, token)
        chosen, candidates, kept = view.candidate(token), view.candidates(request.candidates), view.kept
        kv_bytes, attention = tuple(cache.used_nbytes_per_layer()), recorder.rows()
        return DecodingStep(index=index, position=position, token=chosen, candidates=candidates, kept=kept,
                            forced=False, tokens_computed=feed.shape[1], kv_bytes_per_layer=kv_bytes,
                            seconds=time.perf_counter() - start, lens=lens, attention=attention)

    def read_lens(self, steps: list[DecodingStep]) -> list[DecodingStep]:
        """``steps`` with the lens read for those that wait for it (``lens_after_run``)."""
        waiting = [i for i, step in enumerate(steps) if step.lens is None]
        if not self.request.lens_after_run or not waiting:
            return steps
        residuals = torch.stack([self.state.residuals[steps[i].index] for i in waiting])  # (S, L+1, d)
        readings = lens_readings(self.model, residuals, [steps[i].token.id for i in waiting])
        done = list(steps)
        for i, reading in zip(waiting, readings):
            done[i] = replace(steps[i], lens=reading)
        return done


def decode(model, ids, max_new_tokens: int, *, sampling: Sampling = GREEDY,
           record: StepRecordRequest = StepRecordRequest(), stop_ids: Iterable[int] = (),
           token_text: TokenText | None = None, on_step: Callable[[DecodingStep], None] | None = None,
           should_stop: Callable[[], bool] | None = None, step_threads: int | None = None) -> Decoding:
    """Generate up to ``max_new_tokens`` after the prompt ``ids`` ((T,) or (1, T)) with the KV cache,
    recording every step as ``record`` asks. ``token_text`` (a token id → its text) fills the
    candidates' text. Stops after emitting a token in ``stop_ids`` (kept), or when ``should_stop()``.
    ``step_threads``: torch's threads for the one-token steps (the module docstring says why)."""
    prompt = check_request(model, ids, max_new_tokens)
    record.check(model.config)
    capacity = prompt.shape[1] + max_new_tokens
    cache = KVCache(model.config, capacity, dtype=model.embed.weight.dtype, device=layer_devices(model))
    state = RunState(cache=cache, history=KVHistory.for_windows(model.config), residuals=[],
                     stop_ids=frozenset(int(token) for token in stop_ids), token_text=token_text)
    loop = StepLoop(model, sampling, record, state, step_threads)
    steps, stop_reason = loop.run(prompt, 0, max_new_tokens, on_step=on_step, should_stop=should_stop)
    steps = loop.read_lens(steps)
    return Decoding(prompt_ids=tuple(prompt[0].tolist()), steps=tuple(steps), sampling=sampling, request=record,
                    max_new_tokens=max_new_tokens, stop_reason=stop_reason, cache_capacity_bytes=cache.nbytes,
                    state=state)
