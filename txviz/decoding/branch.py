"""A branch: the same prompt and the same steps up to step t, another candidate chosen at step t,
and the continuation from there.

Step t's distribution came from the tokens before its position p, whose keys and values the run's
cache already holds: the branch reuses those p tokens (txviz.decoding.history.cache_for_prefix) and
runs only the steps after t. Its step t is the run's, with the candidate chosen instead (marked
``forced``; its lens reading comes from the residuals the run kept when the lens was asked for).
The continuation samples with a generator seeded afresh, as a new run would: a branch therefore
equals ``decode`` from scratch on the prompt, the first t tokens and the chosen one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import torch

from txviz.decoding.history import cache_for_prefix
from txviz.decoding.lens import lens_reading
from txviz.decoding.run import Decoding, RunState, StepLoop
from txviz.decoding.step import DecodingStep
from txviz.generate import check_request
from txviz.model import InputError


def branch(model, run: Decoding, step: int, token: int, *, max_new_tokens: int | None = None,
           on_step: Callable[[DecodingStep], None] | None = None,
           should_stop: Callable[[], bool] | None = None, step_threads: int | None = None) -> Decoding:
    """Continue ``run`` from its ``step`` with ``token`` (one of that step's candidates, or its own
    token) up to ``max_new_tokens`` new tokens in all (default: the run's), with the run's sampler,
    record request and stop ids; ``step_threads`` as ``decode``'s."""
    if run.state is None:
        raise InputError("this decoding kept no cache to branch from")
    if not 0 <= step < len(run.steps):
        raise InputError(f"step {step} is outside the run's steps 0..{len(run.steps) - 1}")
    total = run.max_new_tokens if max_new_tokens is None else max_new_tokens
    if step >= total:
        raise InputError(f"a branch at step {step} needs more than {step} new tokens, got {total}")
    check_request(model, run.prompt_ids, total)
    chosen = _forced_step(model, run, step, token)
    position = chosen.position
    cache = cache_for_prefix(model, run.state.cache, run.state.history, position, len(run.prompt_ids) + total)
    state = RunState(cache=cache, history=run.state.history.truncated(position),
                     residuals=run.state.residuals[:step + 1], stop_ids=run.state.stop_ids,
                     token_text=run.state.token_text)
    if on_step is not None:
        on_step(chosen)
    steps, stop_reason = [chosen], "stop_id"
    if token not in state.stop_ids:
        loop = StepLoop(model, run.sampling, run.request, state, step_threads)
        more, stop_reason = loop.run(torch.tensor([[token]]), step + 1, total, on_step=on_step, should_stop=should_stop)
        steps += loop.read_lens(more)
    return Decoding(prompt_ids=run.prompt_ids, steps=run.steps[:step] + tuple(steps), sampling=run.sampling,
                    request=run.request, max_new_tokens=total, stop_reason=stop_reason,
                    cache_capacity_bytes=cache.nbytes, branched_at=step, reused_tokens=position, state=state)


def _forced_step(model, run: Decoding, step: int, token: int) -> DecodingStep:
    """The run's step with ``token`` chosen: its record as the step's candidate."""
    original = run.steps[step]
    offered = {candidate.id: candidate for candidate in (*original.candidates, original.token)}
    if token not in offered:
        raise InputError(f"token {token} is not among step {step}'s {len(original.candidates)} candidates "
                         f"or its chosen token: ask for more candidates to branch to it")
    residuals = run.state.residuals[step]
    lens = None if residuals is None else lens_reading(model, residuals, token)
    return replace(original, token=offered[token], forced=True, tokens_computed=0, seconds=0.0, lens=lens)
