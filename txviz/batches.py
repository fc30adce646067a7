"""A hook between the batches of the library's long loops (the chunks of a patching sweep, the batches
of the coreference set): whoever runs them can show progress per batch, stop the run there (an
exception raised by the hook ends the loop) or retune the run (the app sets torch's thread count for
the load of the moment). Nothing happens when no hook is set: the command line's runs are unchanged.

The hook lives in a context variable, so a run in one thread (one visitor's) never reports to another
thread's hook; hooks nest, the inner one called after the outer one.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

BatchHook = Callable[[int, int], None]  # (batches done, batches in this loop)

_hook: ContextVar[BatchHook | None] = ContextVar("txviz_batch_hook", default=None)


@contextmanager
def between_batches(hook: BatchHook) -> Iterator[None]:
    """Call ``hook(done, total)`` after each batch of every loop run inside the block (and any outer hook first)."""
    outer = _hook.get()

    def both(done: int, total: int) -> None:
        if outer is not None:
            outer(done, total)
        hook(done, total)

    token = _hook.set(both)
    try:
        yield
    finally:
        _hook.reset(token)


def batch_done(done: int, total: int) -> None:
    """Called by a loop after each of its batches."""
    hook = _hook.get()
    if hook is not None:
        hook(done, total)
