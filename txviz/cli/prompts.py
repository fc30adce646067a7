"""A prompt given on the command line: refused as the app refuses it (empty, too long, past the model's
context) before or right after the model loads, and the token prepended to it (``--bos``)."""

from __future__ import annotations


def check_text(text: str, label: str, settings) -> None:
    """A prompt the app would take: not empty (the app refuses one: there is nothing to read) and within
    TXVIZ_MAX_PROMPT_CHARS, checked before the model loads."""
    from txviz import limits
    if not text.strip():
        raise ValueError(f"the {label} is empty: give the text to run")
    limits.check_prompt_chars(len(text), settings)


def resolve_bos(choice: str, tokenizer) -> str:
    """``auto``: what the model's own tokenizer does (Gemma prepends <bos>, SmolLM2 nothing). ``app``: the
    app's default, the sink token (SmolLM2 <|endoftext|>, Gemma <bos>), or nothing when the model has none."""
    if choice == "app":
        return "sink" if tokenizer.sink_id is not None else "none"
    if choice != "auto":
        return choice
    return "bos" if tokenizer.adds_bos and tokenizer.bos_id is not None else "none"


def _tokens(n: int) -> str:
    return f"{n:,} token" + ("" if n == 1 else "s")


def check_context(n_prompt: int, n_new: int, context: int) -> None:
    """Prompt + new tokens past the model's context, said with the knob to turn: --max-new-tokens when
    the prompt alone fits."""
    if n_prompt + n_new <= context:
        return
    said = f"The prompt has {_tokens(n_prompt)} + {n_new:,} new = {n_prompt + n_new:,}; the model's context is " \
           f"{_tokens(context)}"
    if n_prompt < context:
        raise ValueError(f"{said}. Lower --max-new-tokens to at most {context - n_prompt:,}.")
    raise ValueError(f"{said}, and the prompt alone fills it. Shorten the prompt.")
