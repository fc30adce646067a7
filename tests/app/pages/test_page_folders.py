"""Every page is a folder of small modules: page.py lays out the tabs and computes nothing; the tab
modules stay short, keep no cache of their own (caches live in app/cache.py) and reach session state
only through app/ui/state.py, which holds its rules once (follow, keep, lazy_tabs, StoppableRun) and
lists every private key."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.ui import state

APP = Path(__file__).resolve().parents[3] / "app"
PAGES = APP / "app_pages"
FOLDERS = sorted(path.parent.name for path in PAGES.glob("*/page.py"))
COMPUTING = {"torch", "numpy", "pandas"}
CACHING = {"cache_data", "cache_resource", "lru_cache"}  # Streamlit's caches, functools'; and a bare @cache
STATE_OWNER = APP / "ui" / "state.py"
# app/cache.py keeps this session's generation timings under a listed private key: app/ui/state.py
# imports app.cache (the store of long link texts), so the cache module cannot import it back
STATE_USERS = [path for path in sorted(APP.rglob("*.py")) if path not in (STATE_OWNER, APP / "cache.py")]


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


def session_state_uses(tree: ast.Module) -> list[int]:
    """The lines that reach Streamlit's session state: ``st.session_state``, ``from streamlit import
    session_state``, or ``getattr(st, "session_state")``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "session_state":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "session_state" for alias in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and node.value == "session_state":
            lines.append(node.lineno)
    return lines


def test_every_page_folder_is_checked():
    assert set(FOLDERS) >= {"attention", "block", "heads", "kv_cache", "moe", "positions", "tradeoffs"}
    assert [path.name for path in PAGES.glob("*.py")] == ["__init__.py"]  # no page outside a folder


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_page_is_a_folder_of_short_modules_with_short_functions(folder):
    assert (PAGES / folder / "page.py").is_file() and (PAGES / folder / "__init__.py").is_file()
    for path in modules(folder):
        source = path.read_text(encoding="utf-8")
        assert len(source.splitlines()) <= 140, path.name
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
def test_a_page_keeps_no_cache_of_its_own(folder):
    for path in modules(folder):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        named |= {decorator.id for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                  for decorator in node.decorator_list if isinstance(decorator, ast.Name)}
        assert not named & (CACHING | {"cache"}), path.name


@pytest.mark.parametrize("path", STATE_USERS, ids=lambda path: str(path.relative_to(APP)))
def test_session_state_is_reached_only_through_app_ui_state(path):
    assert not session_state_uses(ast.parse(path.read_text(encoding="utf-8"))), path


def test_the_guard_sees_each_way_to_session_state():
    for source in ("import streamlit as st\nst.session_state['x'] = 1",
                   "from streamlit import session_state\n",
                   "import streamlit\nvalue = getattr(streamlit, 'session_state')"):
        assert session_state_uses(ast.parse(source)), source
    assert not session_state_uses(ast.parse("from app.ui import state\nstate.put('layer', 1)"))


def test_private_keys_are_listed_and_apart_from_the_url_keys():
    assert all(key.startswith("_") for key in [*state.PRIVATE, *state.PRIVATE_FAMILIES])
    assert not set(state.PRIVATE) & set(state.FIELDS)
    with pytest.raises(KeyError, match="not in state.PRIVATE"):
        state.put("_never_listed", 1)
    with pytest.raises(KeyError, match="not in state.PRIVATE"):
        state.get("_never_listed", None)
