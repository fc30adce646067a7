"""The loaders sit below the analyses: nothing in txviz/loading imports txviz.analysis (or the app), at
the top of a module or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import txviz.loading

LOADING = Path(txviz.loading.__file__).parent
ABOVE = ("txviz.analysis", "txviz.causal", "txviz.lab", "app")


def imported_modules(source: str) -> list[str]:
    """Every module an ``import`` or ``from … import`` names, wherever it stands in the module."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def reaches_up(module: str) -> bool:
    return any(module == above or module.startswith(above + ".") for above in ABOVE)


def test_the_check_sees_an_import_inside_a_function():
    source = "def f():\n    from txviz.analysis.kv import memory\n"
    assert [m for m in imported_modules(source) if reaches_up(m)]
    assert not [m for m in imported_modules("from txviz.model.counts import count_params\n") if reaches_up(m)]


def test_no_loader_imports_an_analysis():
    files = sorted(LOADING.rglob("*.py"))
    assert len(files) > 10  # the package is where the check looks
    upward = {str(path.relative_to(LOADING)): module for path in files
              for module in imported_modules(path.read_text(encoding="utf-8")) if reaches_up(module)}
    assert upward == {}
