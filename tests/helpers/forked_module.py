"""``python -m <module> <args>`` run in a forked copy of the test process instead of a new interpreter.

A worker the code under test starts with ``subprocess.run([sys.executable, "-m", module, ...])`` pays
torch's import again in a new interpreter (~2-3 CPU s). A fork already holds torch; in it the module runs
as ``__main__`` (``runpy``, as ``-m`` does) with its own stdout and stderr, and its exit status, output
and a traceback come back as a ``subprocess.CompletedProcess``. Use it where the worker's answer is under
test, not a fresh interpreter's imports or limits (those keep a real child).
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import tempfile
import traceback
import warnings

from tests.helpers.fresh_imports import in_a_fork


def run_module_in_a_fork(command: list[str], timeout_s: float = 600) -> subprocess.CompletedProcess:
    """``subprocess.run(command, capture_output=True, text=True)`` for ``command`` =
    ``[sys.executable, "-m", module, *args]``, run in a fork."""
    python, flag, module, *args = command
    if (python, flag) != (sys.executable, "-m"):
        raise ValueError(f"not a `python -m` command: {command}")
    answer = in_a_fork(lambda: _run_as_main(module, args), timeout_s)
    if "error" in answer:
        raise AssertionError(f"the forked `-m {module}` failed outside the module: {answer['error']}")
    return subprocess.CompletedProcess(command, answer["returncode"], answer["stdout"], answer["stderr"])


def _run_as_main(module: str, args: list[str]) -> dict:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        os.dup2(out.fileno(), 1)  # the fork's own fds 1 and 2: C-level writes land there too
        os.dup2(err.fileno(), 2)
        sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
        sys.argv = [module, *args]
        returncode = _exit_status(module)
        sys.stdout.flush()
        sys.stderr.flush()
        return {"returncode": returncode, "stdout": _text(out), "stderr": _text(err)}


def _exit_status(module: str) -> int:
    """Run ``module`` as ``__main__``; its exit status as the interpreter would give it."""
    try:
        with warnings.catch_warnings():  # the parent imported it already; -m in a new interpreter would not warn
            warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as done:
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        print(done.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - printed as the interpreter prints an uncaught exception
        traceback.print_exc()
        return 1
    return 0


def _text(file) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")
