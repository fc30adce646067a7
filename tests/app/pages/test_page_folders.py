"""The Positions, Tradeoffs and MoE pages are folders of small modules: page.py lays out
the tabs with one call each and computes nothing; the tab modules stay short and reach cached work
only through app.cache."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PAGES = Path(__file__).resolve().parents[3] / "app" / "app_pages"
FOLDERS = ("positions", "tradeoffs", "moe")
COMPUTING = {"torch", "numpy", "pandas"}
OLD_CACHES = {"app.resources", "app.zoo_resources", "app.kv_resources"}


def modules(folder: str) -> list[Path]:
    return sorted((PAGES / folder).glob("*.py"))


def imported(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_page_is_a_folder_of_short_modules_with_short_functions(folder):
    assert (PAGES / folder / "page.py").is_file() and (PAGES / folder / "__init__.py").is_file()
    assert not (PAGES / f"{folder}.py").exists()  # main.py and the tests would pick the folder anyway
    for path in modules(folder):
        source = path.read_text(encoding="utf-8")
        assert len(source.splitlines()) <= 120, path.name
        tree = ast.parse(source)
        assert ast.get_docstring(tree), f"{path.name} says what it holds"
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                assert node.end_lineno - node.lineno + 1 <= 40, f"{path.name}:{node.name}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_page_py_lays_out_and_leaves_the_computing_to_the_library(folder):
    tree = ast.parse((PAGES / folder / "page.py").read_text(encoding="utf-8"))
    assert not {name.split(".")[0] for name in imported(tree)} & COMPUTING
    assert not [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]  # the tabs live in modules


@pytest.mark.parametrize("folder", FOLDERS)
def test_cached_work_is_reached_through_app_cache_only(folder):
    for path in modules(folder):
        names = imported(ast.parse(path.read_text(encoding="utf-8")))
        assert not any(name.startswith(tuple(OLD_CACHES)) for name in names), path.name
