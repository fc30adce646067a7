"""Greedy generation from a prompt for the KV cache page, checked against the limits first (the
prompt, the chat template, the tokens to generate, the estimated memory and time)."""

from __future__ import annotations

import torch

from app.services.prompts import PromptError, encode, within_budget
from txviz.threads import threads_for_this_run
from txviz import limits as limits_
from txviz.loading.loaded import LoadedModel
from txviz.loading.tokenizer.chat_prompt import wrap_prompt
from txviz.loading.errors import TokenizerError


def generate_from_prompt(loaded: LoadedModel, prompt: str, bos: str, settings: limits_.Limits, max_new_tokens: int,
                         use_cache: bool, chat: bool, on_step=None, stop_at_eos: bool = True):
    """txviz.generate.generate on the prompt (wrapped as a user message with ``chat``);
    ``on_step(step)`` is told after each token. ``stop_at_eos=False`` generates exactly
    ``max_new_tokens`` (a timing needs the same number of steps whatever the model says). On a loaded
    machine it runs on one thread (txviz.threads)."""
    from txviz.generate import generate

    tokenizer = loaded.tokenizer
    encode(loaded, prompt, bos, settings)  # the prompt itself: empty, too long, not text
    try:
        text, bos = wrap_prompt(tokenizer, prompt, bos, chat)
    except TokenizerError as error:
        raise PromptError(f"Cannot wrap the prompt in the chat template: {error}") from None
    encoding = encode(loaded, text, bos, settings, n_new=max_new_tokens)
    within_budget(limits_.generation_estimate(loaded.config, len(encoding.ids), max_new_tokens,
                                              element_bytes=loaded.dtype.itemsize, use_cache=use_cache,
                                              gflops=settings.gflops), settings)
    stop = () if tokenizer.eos_id is None or not stop_at_eos else (tokenizer.eos_id,)
    with threads_for_this_run():
        return generate(loaded.model, torch.tensor(encoding.ids), max_new_tokens, stop_ids=stop, on_step=on_step,
                        use_cache=use_cache)
