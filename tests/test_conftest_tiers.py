"""The fast tier is what it says: ``pytest -m "not e2e"`` deselects every test that needs the real model
or a browser. The e2e marks are set by tests/conftest.py, and must be set before pytest's own ``-m``
deselection (once they were set after it, and the "fast" tier ran every browser test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def collected(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-n", "0", *args, "tests/browser", "tests/test_limits.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    return {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}


def test_the_fast_tier_deselects_browser_tests_and_keeps_the_rest():
    everything, fast = collected(), collected("-m", "not e2e")
    assert any(path.startswith("tests/browser/") for path in everything)
    assert not any(path.startswith("tests/browser/") for path in fast), sorted(fast)
    assert "tests/test_limits.py" in fast
