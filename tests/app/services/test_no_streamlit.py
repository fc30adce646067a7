"""app/services never imports Streamlit: the computations run (and are tested) without a page."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SERVICES = Path(__file__).resolve().parents[3] / "app" / "services"
MODULES = sorted(SERVICES.glob("*.py"))


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, at any depth (a function-level import counts too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_every_concept_has_its_module():
    assert {p.stem for p in MODULES} >= {"prompts", "traces", "texts", "generation", "kv_sharing", "positions",
                                         "heads", "zoo", "byte_cache", "models"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_a_service_module_does_not_import_streamlit(path):
    names = imported_names(path)
    assert names or path.stem == "__init__"  # the walk finds imports at all
    assert not [n for n in names if n == "streamlit" or n.startswith("streamlit.")]


def test_importing_every_service_loads_no_streamlit_even_indirectly():
    code = ("import importlib, pkgutil, sys\n"
            "import app.services as services\n"
            "for module in pkgutil.iter_modules(services.__path__):\n"
            "    importlib.import_module(f'app.services.{module.name}')\n"
            "assert 'app.services.traces' in sys.modules\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'streamlit'))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=SERVICES.parents[1], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
