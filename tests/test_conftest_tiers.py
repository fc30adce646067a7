"""The fast tier is what it says: ``pytest -m "not e2e"`` deselects every test that needs the real model
or a browser. The e2e marks are set by tests/conftest.py, and must be set before pytest's own ``-m``
deselection (once they were set after it, and the "fast" tier ran every browser test)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


class _Tiers:
    """A plugin for the nested session: what ``-m`` kept and what it deselected, by file."""

    def __init__(self):
        self.kept: set[str] = set()
        self.deselected: set[str] = set()

    def pytest_deselected(self, items):
        self.deselected.update(item.nodeid.split("::")[0] for item in items)

    def pytest_collection_finish(self, session):
        self.kept.update(item.nodeid.split("::")[0] for item in session.items)


def tiers(monkeypatch) -> tuple[set[str], set[str]]:
    """(the files of every test collected, the files of those ``-m "not e2e"`` keeps), from one collection
    with this tree's conftest and pyproject, run in this process: a child interpreter importing torch, the
    conftest and every module again cost 4.3 CPU s (measured 2026-12-02, load 5), the nested session
    ~0.3. The nested session's configure points TXVIZ_HOME at a home of its own and removes it when it ends:
    monkeypatch gives this process its own home (and the conftest its record of it) back afterwards."""
    monkeypatch.setenv("TXVIZ_HOME", os.environ.get("TXVIZ_HOME", ""))
    monkeypatch.delenv("TXVIZ_DEFAULT_GGUF", raising=False)
    monkeypatch.setattr(sys.modules["tests.conftest"], "_FRESH_HOME", None)
    monkeypatch.chdir(ROOT)
    found = _Tiers()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0", "-m", "not e2e",
                        "--rootdir", str(ROOT), "tests/browser", "tests/test_limits.py"], plugins=[found])
    assert code == pytest.ExitCode.OK, code
    return found.kept | found.deselected, found.kept


def test_the_fast_tier_deselects_browser_tests_and_keeps_the_rest(monkeypatch):
    everything, fast = tiers(monkeypatch)
    assert any(path.startswith("tests/browser/") for path in everything)
    assert not any(path.startswith("tests/browser/") for path in fast), sorted(fast)
    assert "tests/test_limits.py" in fast
