"""The Decoding page's runs: a prompt checked against the limits, then generated one token at a time by
txviz.decoding.decode, every step recording what the sampler chose between, the new token's attention
row on every layer and head, the cache's bytes, and the logit lens of the chosen token (read once the
run ends, so the streamed steps keep a plain step's pace); branches that continue a run from any step
on its cache; and one step timed again without the cache, on demand.

A run is keyed by everything it was computed from (``DecodingInputs``): the page never shows a run of
other inputs as the one asked for."""

from __future__ import annotations

import time
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Callable, Sequence

import torch

from app.services.prompts import PromptError, encode, within_budget
from txviz import limits as limits_
from txviz.decoding import Decoding, DecodingStep, StepRecordRequest, branch, decode
from txviz.generate import Sampling
from txviz.loading.errors import TokenizerError
from txviz.loading.loaded import LoadedModel
from txviz.loading.tokenizer.chat_prompt import policy_token, wrap_prompt
from txviz.model.kv_cache import kv_elements_per_token_layer, kv_tokens_kept
from txviz.threads import threads_for_this_run

CANDIDATES = 12  # the most probable tokens each step keeps: the sampler chart's bars, the branches offered
# Cores a streamed run's one-token steps leave free for the server's send and the browser's paint: none. Measured
# side by side in chromium on a quiet 2-core machine (SmolLM2, a 64-token prompt, 48 tokens, 6 fresh pages each),
# one spare core left the first token where it was (0.45 s after the click either way) and made the 48 tokens
# 14% slower (3.95 s against 3.46 s). The knob stays so the next machine can be measured the same way.
STREAMING_SPARE_CORES = 0
SAMPLERS = ("greedy", "sample")


@dataclass(frozen=True)
class DecodingInputs:
    """What a run is computed from; two runs of equal inputs are the same run (sampling is seeded)."""

    source: str
    prompt: str
    bos: str
    chat: bool
    max_new_tokens: int
    sampler: str = "greedy"  # or "sample": temperature, then top-k (0: off) and top-p (1: off)
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    @property
    def sampling(self) -> Sampling:
        if self.sampler == "greedy":
            return Sampling()
        return Sampling(temperature=self.temperature, top_k=self.top_k or None,
                        top_p=None if self.top_p >= 1 else self.top_p, seed=self.seed)


def prompt_ids(loaded: LoadedModel, inputs: DecodingInputs, settings: limits_.Limits) -> list[int]:
    """The ids the model reads for ``inputs`` (``prompt_reading``'s)."""
    return prompt_reading(loaded, inputs, settings)[0]


def prompt_reading(loaded: LoadedModel, inputs: DecodingInputs,
                   settings: limits_.Limits) -> tuple[list[int], TokensRead]:
    """(the ids the model reads, how they differ from the sidebar's count): the prompt checked, wrapped in
    the chat template where asked (rendered once: each render runs the template in a child process, about
    0.1 s), encoded with the BOS policy, and the run's estimate within the budget; PromptError otherwise."""
    tokenizer = loaded.tokenizer
    own = encode(loaded, inputs.prompt, inputs.bos, settings)  # the prompt itself: empty, too long, not text
    try:
        text, bos = wrap_prompt(tokenizer, inputs.prompt, inputs.bos, inputs.chat)
    except TokenizerError as error:
        raise PromptError(f"Cannot wrap the prompt in the chat template: {error}") from None
    encoding = encode(loaded, text, bos, settings, n_new=inputs.max_new_tokens)
    within_budget(limits_.generation_estimate(loaded.config, len(encoding.ids), inputs.max_new_tokens,
                                              element_bytes=loaded.dtype.itemsize, gflops=settings.gflops), settings)
    ids = list(encoding.ids)
    return ids, _tokens_read(tokenizer, inputs, ids, sidebar=len(own.ids), held=bos != inputs.bos)


@dataclass(frozen=True)
class TokensRead:
    """How many tokens the model reads for a run, beside the sidebar's count of the prompt alone (its text
    and the BOS policy's token): ``template`` the chat template's own tokens around the prompt (0 without
    it), ``first_in_template`` the policy's token when it is the template's first one, so it is not
    prepended again (else None)."""

    read: int
    sidebar: int
    template: int
    first_in_template: int | None


def _tokens_read(tokenizer, inputs: DecodingInputs, ids: list[int], *, sidebar: int, held: bool) -> TokensRead:
    """``ids`` told apart: the prompt's own tokens, the policy's token (``held``: the template's first
    token is that one, so it was not prepended), the template's."""
    if not inputs.chat:
        return TokensRead(len(ids), sidebar, 0, None)
    bare = len(tokenizer.encode(inputs.prompt, bos="none").ids)
    prepended = 0 if held else sidebar - bare
    return TokensRead(len(ids), sidebar, len(ids) - bare - prepended,
                      policy_token(tokenizer, inputs.bos) if held else None)


def record_request(config) -> StepRecordRequest:
    """Every step: the candidates, the attention row of every layer and head, the lens after the run."""
    return StepRecordRequest(candidates=CANDIDATES, lens=True, lens_after_run=True,
                             attention_layers=tuple(range(config.n_layers)))


def token_text(tokenizer) -> Callable[[int], str | None]:
    return lambda token: tokenizer.display(token) if token < tokenizer.vocab_size else None


def streaming_step_threads() -> int:
    """Torch threads for a streamed run's one-token steps: the run's own, less STREAMING_SPARE_CORES (at least one)."""
    return max(1, torch.get_num_threads() - STREAMING_SPARE_CORES)


def run(loaded: LoadedModel, inputs: DecodingInputs, ids: list[int], *, on_step=None, should_stop=None) -> Decoding:
    """``inputs`` generated after ``ids`` (``prompt_ids``); ``on_step(step)`` sees each step as it is drawn,
    ``should_stop()`` is asked before each (a run stopped so keeps its steps, and its cache to branch from)."""
    tokenizer = loaded.tokenizer
    stop = () if tokenizer.eos_id is None else (tokenizer.eos_id,)
    with threads_for_this_run():
        return decode(loaded.model, ids, inputs.max_new_tokens, sampling=inputs.sampling,
                      record=record_request(loaded.config), stop_ids=stop, token_text=token_text(tokenizer),
                      on_step=on_step, should_stop=should_stop, step_threads=streaming_step_threads())


def branch_run(loaded: LoadedModel, source_run: Decoding, step: int, token: int, *, on_step=None,
               should_stop=None) -> Decoding:
    """``source_run`` continued from ``step`` with ``token`` instead, on its cache of the tokens before it."""
    with threads_for_this_run():
        return branch(loaded.model, source_run, step, token, on_step=on_step, should_stop=should_stop,
                      step_threads=streaming_step_threads())


def reaching_seconds(source_run: Decoding, step: int) -> float:
    """What the run spent putting the tokens before ``step``'s position into its cache and reading that
    step's distribution: its prompt pass (step 0) through ``step`` itself, whose forward ran the token just
    before the position (the time a branch at ``step`` does not spend again)."""
    return sum(s.seconds for s in source_run.steps[:step + 1])


def branch_seconds(branched: Decoding) -> float:
    """What a branch itself spent: its steps after the one it chose at (that one read from the run)."""
    return sum(s.seconds for s in branched.steps[branched.branched_at:])


@dataclass(frozen=True)
class BranchComparison:
    """The run's tokens from a branch's step on beside the branch's (offsets from that step). At offset 0
    the branch took another candidate, so the two always differ there; after it a branch often says the
    same words a token earlier or later ("and six, are the most…" beside "six, seven, … are the most…"),
    which a step-by-step comparison would call different to the end. So the two are compared as texts
    (difflib's longest matching stretches, after offset 0): ``shared`` holds each stretch as
    (run offset, branch offset, length), and ``*_differ`` the offsets of each side in no stretch.

    A side stopped by a click made no tokens past its end: the other's tokens after the last stretch, past
    as many as the stopped side still has there, are not compared (``*_compared``: how many of each side's
    tokens are), so they are not marked as differing from tokens never made. A side that ended on its own
    (its end-of-text token) did end there, and the other going on is a difference. ``again``: the first
    offset after 0 where they differ (the two read alike up to it, step for step), None when they never do.
    ``rejoin``: (run offset, branch offset) of the stretch that runs to the end of both compared parts, the
    point from which they read the same tokens again; None when they end differently."""

    run_compared: int
    branch_compared: int
    run_differ: frozenset[int]
    branch_differ: frozenset[int]
    shared: tuple[tuple[int, int, int], ...]
    again: int | None
    rejoin: tuple[int, int] | None


def compare_branch(run_ids: Sequence[int], branch_ids: Sequence[int], *, run_cut: bool,
                   branch_cut: bool) -> BranchComparison:
    """``run_ids`` and ``branch_ids`` from the branch's step on; ``*_cut``: that side was stopped by a click."""
    run_ids, branch_ids = list(run_ids), list(branch_ids)
    matcher = SequenceMatcher(None, run_ids[1:], branch_ids[1:], autojunk=False)
    shared = tuple((a + 1, b + 1, n) for a, b, n in matcher.get_matching_blocks() if n)
    run_end, branch_end = (shared[-1][0] + shared[-1][2], shared[-1][1] + shared[-1][2]) if shared else (1, 1)
    both_left = min(len(run_ids) - run_end, len(branch_ids) - branch_end)  # tokens after the last stretch
    run_compared = min(len(run_ids), run_end + both_left) if branch_cut else len(run_ids)
    branch_compared = min(len(branch_ids), branch_end + both_left) if run_cut else len(branch_ids)
    run_differ = _outside(shared, 0, run_compared)
    branch_differ = _outside(shared, 1, branch_compared)
    again = min((run_differ | branch_differ) - {0}, default=None)
    ends_alike = shared and (run_end, branch_end) == (run_compared, branch_compared)
    return BranchComparison(run_compared, branch_compared, run_differ, branch_differ, shared, again,
                            (shared[-1][0], shared[-1][1]) if ends_alike else None)


def _outside(shared: tuple[tuple[int, int, int], ...], side: int, compared: int) -> frozenset[int]:
    inside = {stretch[side] + i for stretch in shared for i in range(stretch[2])}
    return frozenset(i for i in range(compared) if i not in inside)


def seconds_without_cache(loaded: LoadedModel, source_run: Decoding, step: int) -> float:
    """One step's logits the way a decoder without a cache gets them: every token before its position
    run again in one forward pass, timed."""
    ids = torch.tensor([source_run.ids[:source_run.steps[step].position]])
    with threads_for_this_run(), torch.inference_mode():
        start = time.perf_counter()
        loaded.model(ids, last_only=True)
        return time.perf_counter() - start


def kv_formula_per_layer(config, n_tokens: int, element_bytes: int) -> list[int]:
    """The bytes each layer's cache holds after ``n_tokens`` by the formula: 2 × Hkv × D × tokens kept
    (a sliding layer keeps its window) × bytes per element."""
    per_token = kv_elements_per_token_layer(config.n_kv_heads, config.head_dim) * element_bytes
    return [per_token * kv_tokens_kept(window, n_tokens) for window in config.layer_windows]


def step_tokens(run_: Decoding) -> list[str]:
    """Each generated token as text (its id where the tokenizer has none)."""
    return [step.token.text if step.token.text is not None else f"#{step.token.id}" for step in run_.steps]


__all__ = ["CANDIDATES", "SAMPLERS", "DecodingInputs", "DecodingStep", "PromptError", "branch_run", "branch_seconds",
           "BranchComparison", "compare_branch",
           "TokensRead", "kv_formula_per_layer", "prompt_ids", "prompt_reading", "reaching_seconds", "record_request", "run", "seconds_without_cache",
           "step_tokens", "streaming_step_threads"]
