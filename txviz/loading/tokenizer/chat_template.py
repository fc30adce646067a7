"""Chat templates from model files, rendered where the OS can stop them (txviz.loading.isolated).

A template is Jinja code written by whoever made the file. It runs in a child interpreter with its
memory and CPU capped and a wall-clock deadline, inside Jinja's immutable sandbox with ``*`` and ``**``
bounded (txviz/loading/workers/chat_template.py). One slow or greedy template costs its own session
at most ``CHAT_TEMPLATE_SECONDS`` and never blocks another session's thread: the server only waits on
a pipe. A real template renders in ~1 ms; the child's start (~0.1 s) is the price of the boundary.
"""

from __future__ import annotations

from typing import Any

from txviz.loading.isolated import IsolatedError, Limits, run_worker

MAX_CHAT_CHARS = 1 << 20  # a rendered chat is a few KiB; a template writing more is refused
CHAT_TEMPLATE_SECONDS = 2.0
CHAT_TEMPLATE_LIMITS = Limits(seconds=CHAT_TEMPLATE_SECONDS, memory_bytes=256 << 20, max_reply_bytes=8 << 20)


class ChatTemplateError(ValueError):
    """The template could not render these messages; the message says why in one line."""


def render_chat_template(source: str, context: dict[str, Any]) -> str:
    """``source`` rendered with ``context`` (messages, add_generation_prompt, bos/eos tokens, extras)."""
    try:
        reply = run_worker("chat_template", {"source": source, "context": context, "max_chars": MAX_CHAT_CHARS},
                           CHAT_TEMPLATE_LIMITS)
    except IsolatedError as error:
        raise ChatTemplateError(_reason(error)) from None
    except TypeError as error:  # a context JSON cannot carry (the caller's extras)
        raise ChatTemplateError(f"the chat template's inputs must be plain JSON values: {error}") from None
    return str(reply["text"])


def _reason(error: IsolatedError) -> str:
    if error.kind == "timeout":
        return f"the chat template ran for more than {CHAT_TEMPLATE_SECONDS:g} s and was stopped"
    if error.kind in ("memory", "killed"):
        return f"the chat template needed more memory or CPU than allowed and was stopped ({error})"
    if str(error).startswith(("chat template", "the chat template")):
        return str(error)
    return f"the chat template failed: {error}"
