"""The command line's long analyses (``coref``, ``patch``, ``circuit``) follow the app's thread rule
(txviz.threads): on one thread while other processes hold the cores, the process's own count after; and
``circuit`` reports its batches when its estimate is long, in text mode."""

from __future__ import annotations

import pytest
import torch

from txviz import cli, limits, threads
from txviz.loading.zoo import SHIPPED_ZOO

MODEL = str(SHIPPED_ZOO / "base_long")
CLEAN = "Mary gave the book to John. John gave it back to"
CORRUPT = "Mary gave the book to John. Mary gave it back to"
PAIR = ("--clean", CLEAN, "--corrupt", CORRUPT, "--answer", "Mary", "--wrong", "John")


@pytest.fixture
def loaded_machine(monkeypatch):
    """Other processes hold every core but one: the rule says one thread; the process itself has two."""
    monkeypatch.setattr(threads, "PROCESS_THREADS", 2)
    monkeypatch.setattr(threads, "threads_now", lambda: 1)
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(1)  # the suite's own setting (tests/conftest.py)


def _threads_seen_by(monkeypatch, module, name: str, answer=None) -> list[int]:
    """The threads ``module.name`` runs on, recorded at each call (its work done, or ``answer`` given instead)."""
    seen: list[int] = []
    original = getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return original(*args, **kwargs) if answer is None else answer

    monkeypatch.setattr(module, name, spy)
    return seen


def test_coref_runs_on_one_thread_under_load_and_gives_the_threads_back(loaded_machine, monkeypatch, capsys):
    from txviz.analysis.coref import ranking

    # the zoo's word-level vocabulary cannot hold the built-in set's names: the threads are what is tested
    seen = _threads_seen_by(monkeypatch, ranking, "evaluate", answer={"n_cases": 0})
    assert cli.main(["coref", "--model", MODEL, "--json"]) == 0
    assert seen == [1] and torch.get_num_threads() == 2


def test_patch_runs_on_one_thread_under_load(loaded_machine, monkeypatch, capsys):
    from txviz.causal import report

    seen = _threads_seen_by(monkeypatch, report, "patch_report")
    assert cli.main(["patch", "--model", MODEL, "--json", *PAIR]) == 0
    assert seen == [1] and torch.get_num_threads() == 2


def test_circuit_runs_on_one_thread_and_a_long_run_reports_its_batches(loaded_machine, monkeypatch, capsys):
    """The progress callback once named itself (a local shadowing the console's progress): the first batch
    of any text-mode run estimated past 5 s ended in a TypeError."""
    from txviz.circuit import cost, report

    seen = _threads_seen_by(monkeypatch, report, "circuit_report")
    monkeypatch.setattr(cost, "circuit_estimate", lambda *a, **k: limits.Estimate(what="a circuit", bytes=1 << 20, seconds=60.0))
    assert cli.main(["circuit", "--model", MODEL, *PAIR, "--edges", "5", "--steps", "1"]) == 0
    assert seen == [1] and torch.get_num_threads() == 2
    assert "batch 1 of at most" in capsys.readouterr().err
