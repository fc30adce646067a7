"""The house's imports point one way: the import contracts in pyproject.toml ([tool.importlinter]) hold
for the tree, and each of them breaks when a circle or an upward import is added — inside a function too,
where a circle hides from a reader (grimp reads every import statement of a file)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.import_contracts import check

ROOT = Path(__file__).resolve().parents[1]

# (file, an import added inside a function, the contract it must break)
BREAKS = [
    ("txviz/loading/errors.py", "from txviz.loading import fetch", "txviz-acyclic"),  # errors <-> fetch
    ("txviz/loading/errors.py", "from txviz.loading import fetch", "loading-layers"),
    ("txviz/model/norm.py", "import txviz.analysis.block", "txviz-layers"),
    ("txviz/loading/gguf/loader.py", "from txviz.loading import load", "loading-face"),
    ("txviz/loading/tokenizer/bpe.py", "from txviz.loading.tokenizer import tokenizer", "txviz-acyclic"),
    ("txviz/capture/maps.py", "import streamlit", "library-not-app"),
    ("app/services/prompts.py", "from app import cache", "app-layers"),
    ("app/services/prompts.py", "from app import cache", "app-acyclic"),  # cache imports services
    ("app/services/traces.py", "from app.figures import big_maps", "app-layers"),  # services draw no figures
    ("app/app_pages/moe/page.py", "import app.app_pages.kv_cache.page", "app-pages-independent"),
    ("app/services/zoo.py", "from app.ui import state", "services-no-streamlit"),  # state imports streamlit
]


def test_the_tree_keeps_every_import_contract():
    result = check(ROOT / "pyproject.toml")
    assert not result["could_not_run"] and result["broken_names"] == [], result
    assert result["kept"] == len(BREAKS_BY_CONTRACT) and result["broken"] == 0


BREAKS_BY_CONTRACT = {contract for _, _, contract in BREAKS}  # every contract is shown to break


def test_a_hidden_circle_or_an_upward_import_breaks_its_contract(tmp_path):
    for package in ("txviz", "app"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    unchanged = [(path, "pass", contract) for path, _, contract in BREAKS]  # the copy keeps them all first
    cases = unchanged + BREAKS
    done = subprocess.run([sys.executable, "-m", "tests.helpers.import_contracts", json.dumps(cases)],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    for (path, statement, contract), result in zip(cases, results):
        expected = 0 if statement == "pass" else 1
        assert (result["kept"], result["broken"]) == (1 - expected, expected), (path, statement, contract, result)
