"""A prompt checked before anything runs: encoded, within the model's context and the limits
(txviz.limits), or refused with a PromptError that says why and what to change."""

from __future__ import annotations

from txviz import limits as limits_
from txviz.loading.loaded import LoadedModel
from txviz.loading.errors import TokenizerError


class PromptError(ValueError):
    """A prompt the app cannot trace; the message says why and what to change."""


def encode(loaded: LoadedModel, prompt: str, bos: str, settings: limits_.Limits, *, n_new: int = 0,
           long: bool = False):
    """The prompt's encoding, or PromptError: empty, too many characters, not text, or more tokens
    (+ ``n_new`` to generate) than the model's context or the limits allow (TXVIZ_MAX_LONG_TOKENS for
    a ``long`` view, one that keeps summaries past TXVIZ_MAX_TOKENS)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise PromptError("The prompt is empty: type a sentence in the sidebar.")
    tokenizer = loaded.tokenizer
    if tokenizer is None:
        raise PromptError("This model has no tokenizer, so it cannot read text: pick another model.")
    try:
        limits_.check_prompt_chars(len(prompt), settings)
        encoding = tokenizer.encode(prompt, bos=bos)
        limits_.check_prompt_tokens(len(encoding.ids), loaded.config, settings, n_new=n_new, long=long)
    except (TokenizerError, limits_.LimitExceeded) as error:
        raise PromptError(str(error)) from None
    if not encoding.ids:
        raise PromptError("No token is left of the prompt: this model's vocabulary has none for its characters.")
    return encoding


def about(error: PromptError, subject: str) -> str:
    """``error``'s message with its subject named, for a text that is not the sidebar's prompt (the Heads
    page's sentence and completion, the circuit's prompts): "The prompt has 83 tokens" is read as the
    sidebar's, which may have 16."""
    return str(error).replace("The prompt has", f"{subject} has", 1)


def dropped_characters(encoding) -> str | None:
    """A note naming the characters the tokenizer had to leave out, if any."""
    if not encoding.dropped:
        return None
    shown = ", ".join(f"U+{ord(encoding.text[i]):04X}" for i in encoding.dropped[:8])
    more = f" and {len(encoding.dropped) - 8} more" if len(encoding.dropped) > 8 else ""
    return (f"{len(encoding.dropped)} character(s) have a byte this model's vocabulary has no token for and are "
            f"left out of what the model sees: {shown}{more}.")


def within_budget(estimate: limits_.Estimate, settings: limits_.Limits) -> limits_.Estimate:
    """The estimate, or PromptError saying what it would take and which setting to change."""
    try:
        return limits_.check_budget(estimate, settings)
    except limits_.LimitExceeded as error:
        raise PromptError(str(error)) from None


def check_passes(loaded: LoadedModel, n_tokens: int, n_passes: int, what: str, settings: limits_.Limits, *,
                 capture: tuple[str, ...] = ("logits",)) -> None:
    """PromptError unless ``n_passes`` forward passes over ``n_tokens`` (one at a time, each keeping
    ``capture``) fit the memory budget: the fixed-size analyses (scaling losses, KV conversions, the
    induction test, the coreference set) are checked like a trace, so a small TXVIZ_MEMORY_BUDGET holds."""
    one = limits_.trace_estimate(loaded.config, max(n_tokens, 1), capture, element_bytes=loaded.dtype.itemsize,
                                 gflops=settings.gflops)
    within_budget(limits_.Estimate(what, one.bytes, one.seconds * n_passes), settings)
