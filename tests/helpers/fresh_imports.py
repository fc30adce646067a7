"""Which packages importing some modules pulls in (or some work imports), checked in a forked copy of
the test process.

A child interpreter proves it from nothing but pays torch's import again (~2 CPU s each time). A fork has
torch already; in it the packages under test (and anything that could import the watched ones on their
behalf: the project's own packages) are forgotten, so they run their module code afresh, exactly as a new
interpreter would. A finder placed first on ``sys.meta_path`` records every import of a watched package
and refuses it, so the record also holds imports made inside a function or behind a ``try``. Packages
that stay loaded in the fork (torch, numpy, …) are third-party code that never imports the app's own.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import time
from typing import Callable


class _Recorder:
    """A meta path finder that records and refuses the import of any module of ``watched`` packages."""

    def __init__(self, watched: set[str]):
        self.watched, self.seen = watched, []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.watched:
            self.seen.append(name)
            raise ImportError(f"{name} is watched")
        return None


def watched_imports(modules: list[str], forget: set[str], watched: set[str], timeout_s: float = 120) -> dict:
    """In a fork that forgot the packages ``forget`` (and ``watched``), import ``modules``; return
    ``{"imported": [the modules now loaded whose package is in forget], "watched": [watched imports tried]}``.
    An import that fails for another reason fails the caller, with its message."""
    result = in_a_fork(lambda: _import_forgetting(modules, forget, watched), timeout_s)
    if "error" in result:
        raise AssertionError(f"importing {modules} in the fork failed: {result['error']}")
    return result


def in_a_fork(work: Callable[[], dict], timeout_s: float = 120) -> dict:
    """``work()`` run in a forked copy of this process; its result (a JSON-able dict) comes back through
    a pipe. An exception in the fork comes back as ``{"error": ...}``; one still running past
    ``timeout_s`` is killed and fails the caller."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest, whatever happens
        try:
            os.close(read_end)
            try:
                result = work()
            except BaseException as error:  # noqa: BLE001 - sent to the parent
                result = {"error": f"{type(error).__name__}: {error}"}
            os.write(write_end, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        reply = _read_until_closed(read_end, pid, timeout_s)
    finally:
        os.close(read_end)
    return json.loads(reply or b'{"error": "the fork wrote nothing"}')


def _import_forgetting(modules: list[str], forget: set[str], watched: set[str]) -> dict:
    gone = forget | watched
    for name in [n for n in sys.modules if n.split(".")[0] in gone]:
        del sys.modules[name]
    recorder = _Recorder(watched)
    sys.meta_path.insert(0, recorder)
    try:
        for module in modules:
            importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - sent to the parent, which fails the test with it
        return {"error": f"{type(error).__name__}: {error}", "watched": recorder.seen}
    loaded = sorted(n for n in sys.modules if n.split(".")[0] in forget)
    return {"imported": loaded, "watched": recorder.seen}


def _read_until_closed(fd: int, pid: int, timeout_s: float) -> bytes:
    """What the child wrote, up to its exit (its end of the pipe closes); killed past ``timeout_s``."""
    chunks, deadline = [], time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the forked import was still running after {timeout_s} s")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    return b"".join(chunks)
