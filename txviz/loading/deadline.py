"""Run untrusted pure-Python work (a chat template from a model file) with a wall-clock limit.

Jinja's sandbox stops a template from reaching Python objects, and caps ``range``, but not nested loops:
``{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}`` over a long string runs for hours. A
compiled template is ordinary Python bytecode, so the work runs in a helper thread and, past the
deadline, an exception is raised inside that thread (``PyThreadState_SetAsyncExc``), which Python
delivers between two bytecodes: the loop stops, and the caller gets DeadlineExceeded at once.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Callable, TypeVar

T = TypeVar("T")


class DeadlineExceeded(Exception):
    """The work ran past its limit and was stopped."""


class _Stop(BaseException):
    """Raised inside the worker thread; a BaseException, so the work's own ``except Exception`` lets it by."""


def run_with_deadline(work: Callable[[], T], seconds: float) -> T:
    """``work()``'s result or exception, or DeadlineExceeded after ``seconds`` (the work is stopped)."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except _Stop:
            outcome["stopped"] = True
        except BaseException as error:  # handed to the caller as is
            outcome["error"] = error

    worker = threading.Thread(target=run, name="txviz-deadline", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(_Stop))
        worker.join(5.0)
        raise DeadlineExceeded(f"stopped after {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
