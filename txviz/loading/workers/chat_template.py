"""Render a model file's chat template in a sandbox inside a capped child process.

The environment is the one transformers uses (trim_blocks, lstrip_blocks, loopcontrols, ``tojson``,
``raise_exception``, ``strftime_now``), always Jinja's immutable sandbox, with ``*`` and ``**`` checked
before they run: Jinja folds constant expressions while compiling, so ``{{ 7 ** 11529602 }}`` would
otherwise be computed before any template line runs. Output is streamed and capped.
Request: {"source", "context", "max_chars"}; reply: {"text"}.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, str(Path(__file__).parent))
from _serve import Refused, serve  # noqa: E402

MAX_INT_BITS = 4096  # far past any number a chat template prints
MAX_SEQUENCE_ITEMS = 1 << 20


def _bounded_power(left, right):
    if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        if right * abs(left).bit_length() > MAX_INT_BITS:
            raise Refused(f"the chat template computes a number over {MAX_INT_BITS} bits ({left} ** {right})")
    return left ** right


def _bounded_product(left, right):
    for seq, count in ((left, right), (right, left)):
        if isinstance(seq, (str, list, tuple)) and isinstance(count, int):
            if len(seq) * count > MAX_SEQUENCE_ITEMS:
                raise Refused(f"the chat template builds a sequence of {len(seq) * count:,} items")
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise Refused(f"the chat template computes a number over {MAX_INT_BITS} bits")
    return left * right


def _environment():
    class BoundedSandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})  # intercepted operators are never folded at compile time

        def call_binop(self, context, operator, left, right):
            if operator == "**":
                return _bounded_power(left, right)
            if operator == "*":
                return _bounded_product(left, right)
            return super().call_binop(context, operator, left, right)

    def raise_exception(message):
        raise Refused(f"chat template refused the messages: {message}")

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def handle(request: dict) -> dict:
    try:
        template = _environment().from_string(request["source"])
    except jinja2.TemplateError as error:
        raise Refused(f"the chat template does not compile: {error}") from None
    chunks, size, limit = [], 0, int(request["max_chars"])
    for chunk in template.generate(**request["context"]):
        size += len(chunk)
        if size > limit:
            raise Refused(f"the chat template wrote more than {limit:,} characters")
        chunks.append(chunk)
    return {"text": "".join(chunks)}


if __name__ == "__main__":
    serve(handle)
