"""The fast tier is what it says: ``pytest -m "not e2e"`` deselects every test that needs the real model
or a browser. The e2e marks are set by tests/conftest.py, and must be set before pytest's own ``-m``
deselection (once they were set after it, and the "fast" tier ran every browser test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.deselection_probe import PREFIX

ROOT = Path(__file__).resolve().parents[1]


def tiers() -> tuple[set[str], set[str]]:
    """(the files of every test collected, the files of those ``-m "not e2e"`` keeps), from one collection:
    the selected are listed by ``--collect-only -q``, the deselected by tests/helpers/deselection_probe.py
    (two collections cost two interpreters importing torch and the conftest: 53 s of the fast tier under load)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-s", "-p", "no:cacheprovider",
                           "-n", "0", "-p", "tests.helpers.deselection_probe", "-m", "not e2e",
                           "tests/browser", "tests/test_limits.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    fast, deselected = set(), set()
    for line in done.stdout.splitlines():
        if line.startswith(PREFIX):
            deselected.add(line.removeprefix(PREFIX).split("::")[0])
        elif "::" in line:
            fast.add(line.split("::")[0])
    return fast | deselected, fast


def test_the_fast_tier_deselects_browser_tests_and_keeps_the_rest():
    everything, fast = tiers()
    assert any(path.startswith("tests/browser/") for path in everything)
    assert not any(path.startswith("tests/browser/") for path in fast), sorted(fast)
    assert "tests/test_limits.py" in fast
