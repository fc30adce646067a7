"""A prompt as the model reads it: the text (wrapped as a user message in the model's chat template, or
as typed) and the BOS policy in front of it. The app's pages and the command line both take it from here.

A template may open with the very token the policy would prepend: SmolLM2's ChatML opens with
<|im_start|>, which is also its BOS, and Gemma's template opens with <bos>. Prepending it again would feed
the model a doubled token that no reference tokenizer makes, so the policy becomes "none" and the
template's own token is the one the model reads. Another token (SmolLM2's sink, <|endoftext|>) is still
prepended: it is what was asked for, and the template does not hold it."""

from __future__ import annotations

from txviz.loading.tokenizer.tokenizer import BosPolicy, Tokenizer


def wrap_prompt(tokenizer: Tokenizer, prompt: str, bos: BosPolicy, chat: bool) -> tuple[str, BosPolicy]:
    """``(text, bos)`` for ``tokenizer.encode(text, bos=bos)``: ``prompt`` in the chat template with
    ``chat`` (a TokenizerError when the model has none), and ``bos`` unless the text opens with that token."""
    if not chat:
        return prompt, bos
    text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
    prepended = policy_token(tokenizer, bos)
    if prepended is not None and tokenizer.encode(text).ids[:1] == (prepended,):
        return text, "none"
    return text, bos


def policy_token(tokenizer: Tokenizer, bos: BosPolicy) -> int | None:
    """The token ``bos`` puts in front of a prompt: the BOS for "bos", the sink for "sink"; None for the
    policies that decide by the tokenizer or add nothing."""
    return {"bos": tokenizer.bos_id, "sink": tokenizer.sink_id}.get(bos)
