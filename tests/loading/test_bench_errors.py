"""``txviz bench`` on a model it cannot load: a missing path or a broken file is one line
``txviz: error: …`` and exit status 2, never a worker's traceback wrapped in a RuntimeError."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.forked_module import run_module_in_a_fork
from txviz.cli import main


def test_a_missing_model_is_one_line_and_exit_2(capsys):
    assert main(["bench", "--model", "/nonexistent/x.gguf", "--tokens", "8"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "txviz: error: no such file or directory: /nonexistent/x.gguf"


@pytest.fixture(scope="module")
def broken_model(tmp_path_factory):
    broken = tmp_path_factory.mktemp("bench-errors") / "broken.gguf"
    broken.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + b"\xff" * 40)  # counts far past the file's end
    return broken


WORKER_RUNS: list[list[str]] = []


@pytest.fixture
def worker_in_a_fork(monkeypatch):
    """The bench's worker (``python -m txviz.bench.worker <job>``) run as ``__main__`` in a fork of this process:
    its job, answer and exit status are the real worker's, without a new interpreter importing torch again
    (~3 CPU s; tests/helpers/forked_module.py). Anything else ``subprocess.run`` is asked still runs."""
    real = subprocess.run

    def run(command, *args, **kwargs):
        if list(command[:3]) != [sys.executable, "-m", "txviz.bench.worker"]:
            return real(command, *args, **kwargs)
        WORKER_RUNS.append(list(command))
        return run_module_in_a_fork(list(command))

    monkeypatch.setattr(subprocess, "run", run)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_broken_file_is_refused_by_the_worker_in_one_line(broken_model, worker_in_a_fork, capsys, as_json):
    code = main(["bench", "--model", str(broken_model), "--tokens", "8", "--repeats", "1", "--no-hf"]
                + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in out + err and "RuntimeError" not in out + err
    text = out if as_json else err.strip().splitlines()[-1]
    assert "broken.gguf" in text and ("txviz: error:" in text or '"type": "ModelLoadError"' in text)
    assert WORKER_RUNS and WORKER_RUNS[-1][3].startswith("{")  # the worker answered its job
